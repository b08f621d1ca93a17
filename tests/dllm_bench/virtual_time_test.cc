// The serving simulator's parts over the real engine: CostOfPass on a hand-built batch, and
// an engine whose clock is virtual (EngineOptions::clock), advanced by each forward as
// dllm-serve-sim does. Timings and deadlines must then be exactly the virtual ones, whatever
// the wall clock did.
#include <catch2/catch.hpp>
#include <memory>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "bench/step_cost_executor.h"
#include "bench/virtual_clock.h"
#include "engine/engine_impl.h"
#include "tests/engine/scheduler/collect_sink.h"
#include "tests/support/fake_executor.h"
#include "tests/support/scripted_engine.h"

namespace dllm::bench {
namespace {

TEST_CASE("virtual time: the cost of a pass", "[sim][step_cost]") {
  std::vector<int32_t> canvas_a(10, 0), canvas_b(20, 0);
  AttentionMaps maps;
  StepBatch batch;
  SequenceStep a;
  a.tokens = canvas_a;
  for (int p = 0; p < 10; ++p) a.query_positions.push_back(p);  // full
  a.predict_positions = {6, 7, 8, 9};
  SequenceStep b;
  b.tokens = canvas_b;
  b.query_positions = {17, 18, 19};
  b.predict_positions = {18, 19};
  b.first_layer = 2;  // of 4: half the layers
  b.attention_maps = &maps;
  batch.sequences = {a, b};
  const StepCost c = CostOfPass(batch, 4);
  CHECK(c.rows == 11.5);                // 10 + 3 * 0.5
  CHECK(c.key_rows == 100 + 1.5 * 20);  // rows x positions
  CHECK(c.map_key_rows == 1.5 * 20);    // only b writes maps
  CHECK(c.predicted_rows == 6);
  CHECK(c.sequences == 2);
}

GenerationRequest Request(absl::Time deadline) {
  GenerationRequest r;
  r.prompt_ids = {20, 21, 22};
  r.max_new_tokens = 8;
  r.decoding.block_length = 8;  // steps = 8: one token per step
  r.cache.policy = CachePolicyKind::kNone;
  r.deadline = deadline;
  return r;
}

TEST_CASE("virtual time: request timings and deadlines follow the engine's clock",
          "[sim][virtual_time]") {
  VirtualClock clock;
  constexpr double kStepS = 0.25;
  int passes = 0;
  // Virtual time stands still until both requests are submitted: otherwise a worker that
  // runs ahead of this thread (a loaded machine) could finish the first request before the
  // second one is submitted, at a later virtual time.
  absl::Notification submitted;
  auto executor = std::make_unique<StepCostExecutor>(
      std::make_unique<testing::FakeExecutor>(int64_t{1} << 30, testing::ScriptedRow), 1,
      [&](const StepCost&, const StepCost& pass) {
        CHECK(pass.sequences == 1);
        ++passes;
        submitted.WaitForNotification();
        clock.Set(clock.elapsed_s() + kStepS);
      });
  EngineOptions options;
  options.max_batch_sequences = 1;  // the two requests run one after the other
  options.clock = &clock;
  auto engine = CreateEngineForTesting(options, testing::FakeConfig(false), std::move(executor),
                                       std::make_unique<testing::FakeTokenizer>());
  REQUIRE(engine.ok());

  // Eight steps of 0.25 virtual seconds: 2 s, its first commit after one step.
  auto whole = std::make_shared<testing::CollectSink>();
  // Deadline 2.6 s: checked before each step, which start at 2.0 + 0.25 k once the first
  // request is done; the step starting at 2.75 s (the fourth) is not run.
  auto cut = std::make_shared<testing::CollectSink>();
  const bool whole_ok = (*engine)->Submit(Request(absl::InfiniteFuture()), whole).ok();
  const bool cut_ok = (*engine)->Submit(Request(clock.Now() + absl::Milliseconds(2600)), cut).ok();
  submitted.Notify();  // before any REQUIRE: a parked worker would hang the engine's teardown
  REQUIRE(whole_ok);
  REQUIRE(cut_ok);

  const FinalEvent a = whole->Wait();
  REQUIRE(a.status.ok());
  CHECK(a.stats.steps == 8);
  CHECK(a.stats.queue_seconds == 0);
  CHECK(a.stats.first_commit_seconds == kStepS);
  CHECK(a.stats.total_seconds == 8 * kStepS);

  const FinalEvent b = cut->Wait();
  CHECK(b.reason == FinishReason::kDeadline);
  CHECK(absl::IsDeadlineExceeded(b.status));
  CHECK(b.stats.steps == 3);
  CHECK(b.stats.queue_seconds == 2.0);
  CHECK(b.stats.total_seconds == 2.75);
  CHECK(passes == 11);
}

// Reports when the worker has retired every request (a final event comes before the worker
// frees the request's batch slot).
class IdleWatch final : public EngineObserver {
 public:
  void OnQueue(const QueueInfo& info) override {
    absl::MutexLock lock(&mu_);
    idle_ = info.running == 0 && info.waiting == 0;
  }
  void WaitIdle() {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(&idle_));
  }

 private:
  absl::Mutex mu_;
  bool idle_ ABSL_GUARDED_BY(mu_) = false;
};

TEST_CASE("virtual time: cost-aware admission refuses what the backlog makes late",
          "[sim][virtual_time][admission]") {
  VirtualClock clock;
  constexpr double kStepS = 0.25;
  auto executor = std::make_unique<StepCostExecutor>(
      std::make_unique<testing::FakeExecutor>(int64_t{1} << 30, testing::ScriptedRow), 1,
      [&](const StepCost&, const StepCost&) { clock.Set(clock.elapsed_s() + kStepS); });
  IdleWatch idle;
  EngineOptions options;
  options.max_batch_sequences = 1;
  options.clock = &clock;
  options.observer = &idle;
  auto engine = CreateEngineForTesting(options, testing::FakeConfig(false), std::move(executor),
                                       std::make_unique<testing::FakeTokenizer>());
  REQUIRE(engine.ok());
  Engine& e = **engine;

  // Without measurements nothing is refused: a deadline far too short is admitted (and
  // expires), even behind a running request.
  absl::Notification entered, release;
  auto first = testing::BlockingSink(&entered, &release);
  REQUIRE(e.Submit(Request(absl::InfiniteFuture()), first).ok());
  entered.WaitForNotification();  // parked after its first step
  auto hopeless = std::make_shared<testing::CollectSink>();
  REQUIRE(e.Submit(Request(clock.Now() + absl::Milliseconds(100)), hopeless).ok());
  release.Notify();
  REQUIRE(first->Wait().status.ok());  // measured: 8 steps for 8 masks, 0.25 s each
  CHECK(hopeless->Wait().reason == FinishReason::kDeadline);

  // One request runs, parked after its first step: 7 of its steps are left, forecast as 8
  // (masks left × steps per mask, published before the step). A new request needs 8 steps:
  // it gets the one slot after 8 steps (2 s) and finishes 8 steps later, at 4 s.
  absl::Notification entered2, release2;
  auto running = testing::BlockingSink(&entered2, &release2);
  REQUIRE(e.Submit(Request(absl::InfiniteFuture()), running).ok());
  entered2.WaitForNotification();
  auto late = e.Submit(Request(clock.Now() + absl::Milliseconds(3900)),
                       std::make_shared<testing::CollectSink>());
  REQUIRE(absl::IsResourceExhausted(late.status()));
  CHECK_THAT(std::string(late.status().message()),
             Catch::Contains("cannot finish before its deadline") &&
                 Catch::Contains("forecast 4.0 s (2.0 s waiting for a batch slot"));
  REQUIRE(RetryAfter(late.status()).has_value());
  CHECK(*RetryAfter(late.status()) == absl::Seconds(2));  // the wait for the slot
  auto in_time = std::make_shared<testing::CollectSink>();
  REQUIRE(e.Submit(Request(clock.Now() + absl::Milliseconds(4100)), in_time).ok());
  auto patient = std::make_shared<testing::CollectSink>();
  REQUIRE(e.Submit(Request(absl::InfiniteFuture()), patient).ok());  // no deadline: admitted
  release2.Notify();
  CHECK(running->Wait().status.ok());
  const FinalEvent made_it = in_time->Wait();
  CHECK(made_it.status.ok());
  CHECK(made_it.stats.total_seconds == Approx(7 * kStepS + 8 * kStepS));
  CHECK(patient->Wait().status.ok());
  idle.WaitIdle();

  // A free slot admits whatever the deadline (the request alone is not forecast).
  auto alone = std::make_shared<testing::CollectSink>();
  REQUIRE(e.Submit(Request(clock.Now() + absl::Milliseconds(100)), alone).ok());
  CHECK(alone->Wait().reason == FinishReason::kDeadline);
}

}  // namespace
}  // namespace dllm::bench
