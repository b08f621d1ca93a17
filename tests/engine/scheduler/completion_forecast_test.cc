// The completion forecast's arithmetic by hand (engine/scheduler/completion_forecast.h).
#include "engine/scheduler/completion_forecast.h"

#include <catch2/catch.hpp>
#include <utility>
#include <vector>

namespace dllm {
namespace {

TEST_CASE("forecast: nothing before measurements", "[scheduler][forecast]") {
  CompletionForecast f(4);
  CHECK_FALSE(f.Steps(32, 0).has_value());
  CHECK_FALSE(f.Forecast({}, {}, 8).has_value());
  CHECK(f.BacklogSeconds(100) == 0);
  f.ObserveStep(0.2, 4);
  CHECK_FALSE(f.Steps(32, 0).has_value());  // steps per mask still unknown
  f.ObserveFinished(0, 5);                  // ignored: no mask
  f.ObserveFinished(8, 0);                  // ignored: no step
  CHECK_FALSE(f.Steps(32, 0).has_value());
}

TEST_CASE("forecast: steps from steps per mask, bounded by the cap", "[scheduler][forecast]") {
  CompletionForecast f(4);
  f.ObserveFinished(32, 8);  // 4 tokens per step
  CHECK(*f.Steps(32, 0) == 8);
  CHECK(*f.Steps(32, 5) == 5);
  CHECK(*f.Steps(2, 0) == 1);  // at least one step while a mask is left
  CHECK(*f.Steps(0, 0) == 0);
  // The last finished sequences' mean.
  f.ObserveFinished(10, 10);
  f.ObserveFinished(10, 5);
  CHECK(*f.Steps(100, 0) == Approx(100 * (0.25 + 1.0 + 0.5) / 3));
  // Only the last 64 count: 63 more at 2 steps per mask leave one of the others (0.5).
  for (int i = 0; i < 63; ++i) f.ObserveFinished(10, 20);
  CHECK(*f.Steps(100, 0) == Approx(100 * (0.5 + 63 * 2.0) / 64));
  f.ObserveFinished(10, 20);
  CHECK(*f.Steps(100, 0) == Approx(200));
}

TEST_CASE("forecast: continuous batching played forward", "[scheduler][forecast]") {
  CompletionForecast f(2);  // two batch slots
  f.ObserveStep(0.5, 2);
  auto at = [&](std::vector<double> running, std::vector<double> queued, double own) {
    const auto t = f.Forecast(running, queued, own);
    REQUIRE(t.has_value());
    return std::pair(t->start_s, t->finish_s);
  };
  CHECK(at({}, {}, 4) == std::pair(0.0, 2.0));   // idle: starts at once
  CHECK(at({3}, {}, 4) == std::pair(0.0, 2.0));  // a slot is free
  // Both slots busy: starts when the first frees (step 3), runs 4 steps.
  CHECK(at({3, 7}, {}, 4) == std::pair(1.5, 3.5));
  // Queued first: 5 steps take the slot freed at 3 (until 8), 2 steps the one freed at 7
  // (until 9); the new request gets the slot freed at 8 and ends at 12. A fluid model,
  // (3 + 7 + 5 + 2 + 4) / 2 = 10.5 steps, would be 1.5 steps early.
  CHECK(at({3, 7}, {5, 2}, 4) == std::pair(4.0, 6.0));
  CHECK(f.BacklogSeconds(40) == Approx(40 / 2.0 * 0.5));
}

TEST_CASE("forecast: step time is a moving average", "[scheduler][forecast]") {
  CompletionForecast f(4);
  f.ObserveStep(0.2, 4);
  CHECK(f.BacklogSeconds(4) == Approx(0.2));
  f.ObserveStep(0.4, 4);  // 0.2 + 0.05 × 0.2
  CHECK(f.BacklogSeconds(4) == Approx(0.21));
  f.ObserveStep(-1, 4);  // ignored
  f.ObserveStep(1, 0);   // ignored
  CHECK(f.BacklogSeconds(4) == Approx(0.21));
}

}  // namespace
}  // namespace dllm
