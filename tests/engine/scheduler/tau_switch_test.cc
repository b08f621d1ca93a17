// SLO-aware tau (engine/scheduler/worker.h): a running EntropyCache sequence whose deadline is at
// risk switches to its cache.entropy_threshold_under_load; pinned requests, requests without a
// deadline and a ratio of 0 never switch.
//
// The engine runs on a clock that moves 1 ms per reading (StepClock), so step times, and with
// them the forecast, depend only on the worker's reads, not on this machine's speed. tau -inf
// makes every step full and a tau under load of +inf makes every later step partial, so the
// statistics show exactly when a switch took effect.
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>

#include "engine/engine_impl.h"
#include "engine/scheduler/completion_forecast.h"
#include "tests/engine/scheduler/collect_sink.h"
#include "tests/support/fake_executor.h"
#include "tests/support/step_clock.h"

namespace dllm {
namespace {

using testing::CollectSink;

constexpr float kInf = std::numeric_limits<float>::infinity();

using testing::StepClock;

struct Harness {
  explicit Harness(double slack_ratio) {
    EngineOptions options;
    options.max_batch_sequences = 1;
    options.tau_switch_slack_ratio = slack_ratio;
    options.clock = &clock;
    auto executor = std::make_unique<testing::FakeExecutor>(options.kv_budget_bytes);
    auto created = CreateEngineForTesting(options, testing::FakeConfig(false), std::move(executor),
                                          std::make_unique<testing::FakeTokenizer>());
    REQUIRE(created.ok());
    engine = std::move(*created);
  }
  FinalEvent Run(GenerationRequest r, std::vector<StepEvent>* steps = nullptr) {
    auto sink = std::make_shared<CollectSink>();
    absl::StatusOr<RequestId> id = engine->Submit(std::move(r), sink);
    REQUIRE(id.ok());
    FinalEvent final = sink->Wait();
    if (steps != nullptr) *steps = sink->steps();
    return final;
  }
  StepClock clock;
  std::unique_ptr<Engine> engine;
};

// 8 answer tokens, one per step (8 steps), every step full at tau -inf.
GenerationRequest Request(std::optional<float> tau_under_load, absl::Time deadline) {
  GenerationRequest r;
  r.prompt_ids = {20, 21, 22};
  r.max_new_tokens = 8;
  r.decoding.block_length = 8;
  r.decoding.steps = 8;
  r.cache.policy = CachePolicyKind::kEntropy;
  r.cache.entropy_threshold = -kInf;
  r.cache.recent_k = 2;
  r.cache.entropy_threshold_under_load = tau_under_load;
  r.step_events = true;
  r.deadline = deadline;
  return r;
}

TEST_CASE("TauSwitchDue: time to the deadline against ratio x the forecast time left",
          "[scheduler][slo_tau]") {
  // 10 steps left at 0.1 s: 1 s of work.
  CHECK(TauSwitchDue(1.4, 10, 0.1, 1.5));   // 1.4 s < 1.5 s
  CHECK(!TauSwitchDue(1.6, 10, 0.1, 1.5));  // 1.6 s of slack is enough
  CHECK(TauSwitchDue(0.9, 10, 0.1, 1.0));   // ratio 1: the forecast finish passes the deadline
  CHECK(!TauSwitchDue(1.1, 10, 0.1, 1.0));
  CHECK(!TauSwitchDue(0.5, 10, 0.1, 0.0));   // ratio 0 never switches
  CHECK(!TauSwitchDue(-1.0, 10, 0.1, 0.0));  // not even past the deadline
  CHECK(!TauSwitchDue(1.0, 0, 0.1, 1000));   // nothing left to do
}

TEST_CASE("A request whose deadline is at risk switches to its tau under load",
          "[scheduler][slo_tau]") {
  Harness h(/*slack_ratio=*/1000);
  // The first request gives the forecast its measurements (a step time, steps per mask); it
  // has no deadline, so it never switches.
  const FinalEvent warm = h.Run(Request(kInf, absl::InfiniteFuture()));
  REQUIRE(warm.status.ok());
  CHECK(warm.stats.tau_switch_step == -1);
  CHECK(warm.stats.full_steps == warm.stats.steps);

  // 0.5 s to the deadline against 1000 x (8 steps left x >= 1 ms): at risk from admission
  // (the worker checks right after admitting), so every step is planned at tau +inf: the
  // first full (it fills the cache), the others partial.
  std::vector<StepEvent> steps;
  const FinalEvent at_risk = h.Run(Request(kInf, h.clock.Now() + absl::Milliseconds(500)), &steps);
  REQUIRE(at_risk.status.ok());
  CHECK(at_risk.stats.tau_switch_step == 0);
  CHECK(at_risk.stats.full_steps == 1);
  CHECK(at_risk.stats.partial_steps == at_risk.stats.steps - 1);
  REQUIRE(steps.size() == 8);
  for (const StepEvent& e : steps) CHECK(e.tau_nats == kInf);

  // A request without a tau under load (one that pinned its tau) never switches.
  const FinalEvent pinned =
      h.Run(Request(std::nullopt, h.clock.Now() + absl::Milliseconds(500)), &steps);
  REQUIRE(pinned.status.ok());
  CHECK(pinned.stats.tau_switch_step == -1);
  CHECK(pinned.stats.full_steps == pinned.stats.steps);
  for (const StepEvent& e : steps) CHECK(e.tau_nats == -kInf);

  // Other policies ignore it.
  GenerationRequest dual = Request(kInf, h.clock.Now() + absl::Milliseconds(500));
  dual.cache.policy = CachePolicyKind::kNone;
  CHECK(h.Run(dual).stats.tau_switch_step == -1);
}

TEST_CASE("A request with slack keeps its tau", "[scheduler][slo_tau]") {
  Harness h(/*slack_ratio=*/0.001);
  REQUIRE(h.Run(Request(kInf, absl::InfiniteFuture())).status.ok());
  // 0.001 x (7 steps x a few ms) is far under 0.5 s.
  const FinalEvent relaxed = h.Run(Request(kInf, h.clock.Now() + absl::Milliseconds(500)));
  REQUIRE(relaxed.status.ok());
  CHECK(relaxed.stats.tau_switch_step == -1);
  CHECK(relaxed.stats.full_steps == relaxed.stats.steps);
}

TEST_CASE("A slack ratio of 0 turns switching off", "[scheduler][slo_tau]") {
  Harness h(/*slack_ratio=*/0);
  REQUIRE(h.Run(Request(kInf, absl::InfiniteFuture())).status.ok());
  const FinalEvent r = h.Run(Request(kInf, h.clock.Now() + absl::Milliseconds(500)));
  REQUIRE(r.status.ok());
  CHECK(r.stats.tau_switch_step == -1);
}

TEST_CASE("Engine::Create refuses a slack ratio outside [0, 1000]", "[scheduler][slo_tau]") {
  for (double bad : {-1.0, 1001.0, std::nan("")}) {
    EngineOptions options;
    options.model_dir = "/nonexistent";
    options.tau_switch_slack_ratio = bad;
    auto created = Engine::Create(options);
    REQUIRE(!created.ok());
    CHECK(absl::IsInvalidArgument(created.status()));
    CHECK(created.status().message().find("tau_switch_slack_ratio") != std::string::npos);
  }
}

}  // namespace
}  // namespace dllm
