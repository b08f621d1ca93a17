// The completion forecast's arithmetic by hand (engine/scheduler/completion_forecast.h).
#include "engine/scheduler/completion_forecast.h"

#include <catch2/catch.hpp>

namespace dllm {
namespace {

TEST_CASE("forecast: nothing before measurements", "[scheduler][forecast]") {
  CompletionForecast f(4);
  CHECK_FALSE(f.Steps(32, 0).has_value());
  CHECK_FALSE(f.SecondsToFinish(8, 0).has_value());
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
  // A moving average: 0.25 + 0.1 × (1 - 0.25).
  f.ObserveFinished(10, 10);
  CHECK(*f.Steps(100, 0) == Approx(100 * 0.325));
}

TEST_CASE("forecast: alone, or the backlog's share of the batch", "[scheduler][forecast]") {
  CompletionForecast f(4);
  f.ObserveStep(0.2, 4);
  CHECK(*f.SecondsToFinish(8, 0) == Approx(8 * 0.2));   // alone: own steps
  CHECK(*f.SecondsToFinish(8, 16) == Approx(8 * 0.2));  // (16 + 8) / 4 = 6 < 8
  CHECK(*f.SecondsToFinish(8, 40) == Approx((40 + 8) / 4.0 * 0.2));
  CHECK(f.BacklogSeconds(40) == Approx(40 / 4.0 * 0.2));
  f.ObserveStep(0.4, 4);  // 0.2 + 0.05 × 0.2
  CHECK(f.BacklogSeconds(4) == Approx(0.21));
  f.ObserveStep(-1, 4);  // ignored
  f.ObserveStep(1, 0);   // ignored
  CHECK(f.BacklogSeconds(4) == Approx(0.21));
}

}  // namespace
}  // namespace dllm
