#include "server/http/http_generation.h"

#include <catch2/catch.hpp>

#include "absl/time/clock.h"

namespace dllm {
namespace {

StepEvent Step(int step, int32_t committed, int32_t provisional) {
  StepEvent e;
  e.step = step;
  e.committed_positions = {committed};
  e.committed_tokens = {100 + committed};
  e.provisional_positions = {provisional};
  e.provisional_tokens = {200 + provisional};
  return e;
}

// A reader slower than the engine: it takes events only after several steps arrived.
TEST_CASE("http generation: a slow reader gets every step's commits, only the newest proposals") {
  HttpGeneration call(/*gateway=*/nullptr, "ChatCompletions");
  CommitEvent delta;
  delta.text_delta = "ab";
  call.OnCommit(delta);
  call.OnStep(Step(0, 0, 5));
  call.OnStep(Step(1, 1, 6));
  call.OnStep(Step(2, 2, 7));
  HttpGeneration::Taken taken = call.Take();
  REQUIRE(taken.items.size() == 4);
  CHECK(taken.items[0].delta == "ab");
  CHECK_FALSE(taken.items[0].step.has_value());
  for (int i = 0; i < 3; ++i) {
    const HttpGeneration::Item& item = taken.items[1 + i];
    REQUIRE(item.step.has_value());
    CHECK(item.step->step == i);
    CHECK(item.step->committed_positions == std::vector<int32_t>{i});  // never dropped
    CHECK(item.step->committed_tokens == std::vector<int32_t>{100 + i});
    const bool newest = i == 2;
    CHECK(item.provisional_dropped == !newest);
    CHECK(item.step->provisional_positions.empty() == !newest);
  }
  // A reader that keeps up loses nothing.
  call.OnStep(Step(3, 3, 8));
  taken = call.Take();
  REQUIRE(taken.items.size() == 1);
  CHECK_FALSE(taken.items[0].provisional_dropped);
  CHECK(taken.items[0].step->provisional_tokens == std::vector<int32_t>{208});
  call.OnStep(Step(4, 4, 9));
  taken = call.Take();
  REQUIRE(taken.items.size() == 1);
  CHECK_FALSE(taken.items[0].provisional_dropped);
  CHECK_FALSE(taken.final.has_value());
}

// The HTTP connection learns of events through the wake function: at once for events that
// arrived before it was set, after each event, and never once it was cleared.
TEST_CASE("http generation: wake is called for waiting and new events, never after clearing") {
  HttpGeneration call(/*gateway=*/nullptr, "ChatCompletions");
  CommitEvent delta;
  delta.text_delta = "ab";
  call.OnCommit(delta);
  int wakes = 0;
  call.SetWake([&wakes] { ++wakes; });
  CHECK(wakes == 1);  // an event was waiting
  CHECK(call.Take().items.size() == 1);
  call.OnCommit(delta);
  call.OnStep(Step(0, 0, 5));
  CHECK(wakes == 3);
  call.SetWake(nullptr);
  call.OnCommit(delta);
  CHECK(wakes == 3);
  CHECK(call.Take().items.size() == 3);
}

}  // namespace
}  // namespace dllm
