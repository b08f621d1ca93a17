// Shadow steps on the real forward pass (CPU backend, random-weight fixtures): they never
// change generations, they measure exactly zero when the partial step is exact, they see
// drift when the cache is stale, and they respect the cost bound (ShadowSteps,
// engine/scheduler/shadow/shadow_steps.h, through the engine). Last, an executor without
// shadow support (the scripted fake): the step runs plain, and no sample is reported.
#include <algorithm>
#include <catch2/catch.hpp>
#include <limits>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "engine/engine.h"
#include "engine/engine_impl.h"
#include "engine/scheduler/shadow/tau_controller.h"
#include "tests/engine/decoding/entropy_cache_params.h"
#include "tests/engine/scheduler/collect_sink.h"
#include "tests/support/fake_executor.h"
#include "tests/support/step_clock.h"

namespace dllm {
namespace {

using testing::CollectSink;

class RecordingObserver final : public EngineObserver {
 public:
  void OnStep(const StepInfo& info) override {
    absl::MutexLock lock(&mu_);
    events_.push_back('T');
    step_seconds_ += info.seconds;
  }
  void OnShadowSample(const ShadowSample& s) override {
    absl::MutexLock lock(&mu_);
    events_.push_back('S');
    samples_.push_back(s);
  }
  std::vector<ShadowSample> samples() {
    absl::MutexLock lock(&mu_);
    return samples_;
  }
  std::string events() {
    absl::MutexLock lock(&mu_);
    return events_;
  }
  double step_seconds() {
    absl::MutexLock lock(&mu_);
    return step_seconds_;
  }

 private:
  absl::Mutex mu_;
  double step_seconds_ = 0;
  std::vector<ShadowSample> samples_;
  std::string events_;
};

std::unique_ptr<Engine> MakeEngine(
    const std::string& fixture, float rate, EngineObserver* observer, int batch = 8,
    TauAutotuneOptions autotune = {},
    double max_time_fraction = std::numeric_limits<double>::infinity()) {
  EngineOptions options;
  options.shadow.max_time_fraction = max_time_fraction;
  options.shadow.tau_autotune = autotune;
  options.model_dir = std::string(DLLM_TEST_DATA_DIR) + "/reference/" + fixture;
  options.max_batch_sequences = batch;
  options.kv_budget_bytes = 64 << 20;
  options.cpu_threads = 1;
  options.shadow.sample_rate = rate;
  options.observer = observer;
  auto engine = Engine::Create(options);
  INFO(engine.status().ToString());
  REQUIRE(engine.ok());
  return std::move(*engine);
}

std::vector<FinalEvent> RunAll(Engine& engine, const std::vector<GenerationRequest>& reqs) {
  std::vector<std::shared_ptr<CollectSink>> sinks;
  for (const auto& r : reqs) {
    sinks.push_back(std::make_shared<CollectSink>());
    auto id = engine.Submit(r, sinks.back());
    INFO(id.status().ToString());
    REQUIRE(id.ok());
  }
  std::vector<FinalEvent> out;
  for (auto& s : sinks) {
    out.push_back(s->Wait());
    INFO(out.back().status.ToString());
    REQUIRE(out.back().status.ok());
  }
  return out;
}

// A mix of schedules and every policy, with partial steps in most.
std::vector<GenerationRequest> Mix() {
  std::vector<GenerationRequest> reqs;
  for (int i = 0; i < 8; ++i) {
    GenerationRequest r;
    r.id = "r" + std::to_string(i);
    for (int j = 0; j < 5 + i; ++j) r.prompt_ids.push_back(7 + 13 * j + i);
    r.max_new_tokens = 16;
    DecodingParams d;
    switch (i % 4) {
      case 0:
        d.schedule = Schedule::kBlock;
        d.block_length = 8;
        break;
      case 1:
        d.schedule = Schedule::kWindow;
        d.window = 4;
        d.confidence_threshold = 0.2f;
        break;
      case 2:
        d.schedule = Schedule::kTimestep;
        d.remasking = Remasking::kEntropy;
        d.steps = 12;
        break;
      default:
        d.schedule = Schedule::kBlock;
        d.block_length = 16;
        d.temperature = 0.7f;
        d.seed = 11 + i;
        break;
    }
    r.decoding = d;
    switch (i % 3) {
      case 0:
        r.cache = testing::EntropyCache(std::numeric_limits<float>::infinity(), 2);
        break;
      case 1:
        r.cache = testing::EntropyCache(0.5f, 4);
        break;
      default:
        r.cache.policy = CachePolicyKind::kInterval;
        r.cache.refresh_interval = 3;
        break;
    }
    if (i == 4) r.cache.policy = CachePolicyKind::kDual;  // block schedule (i % 4 == 0)
    if (i == 7) r.cache.policy = CachePolicyKind::kNone;
    reqs.push_back(r);
  }
  return reqs;
}

TEST_CASE("Shadow steps never change generations (rate 0 vs rate 1)", "[shadow][integration]") {
  for (const std::string fixture : {"llada_mha", "dream_gqa"}) {
    INFO(fixture);
    const std::vector<GenerationRequest> reqs = Mix();
    RecordingObserver off_observer, on_observer;
    std::vector<FinalEvent> off, on;
    {
      auto engine = MakeEngine(fixture, 0.0f, &off_observer);
      off = RunAll(*engine, reqs);
    }
    {
      auto engine = MakeEngine(fixture, 1.0f, &on_observer);
      on = RunAll(*engine, reqs);
    }
    CHECK(off_observer.samples().empty());
    CHECK_FALSE(on_observer.samples().empty());
    for (size_t i = 0; i < reqs.size(); ++i) {
      INFO("request " << i);
      CHECK(on[i].token_ids == off[i].token_ids);
      CHECK(on[i].text == off[i].text);
      CHECK(on[i].stats.steps == off[i].stats.steps);
      CHECK(on[i].stats.full_steps == off[i].stats.full_steps);
      CHECK(on[i].stats.rows_computed == off[i].stats.rows_computed);
    }
  }
}

TEST_CASE("A per-request rate overrides the engine's", "[shadow][integration]") {
  RecordingObserver observer;
  auto engine = MakeEngine("llada_mha", 0.0f, &observer, 2);  // two slots: nobody queues
  std::vector<GenerationRequest> reqs = Mix();
  reqs.resize(2);
  reqs[0].cache.shadow_sample_rate = 1.0f;
  RunAll(*engine, reqs);
  const auto samples = observer.samples();
  REQUIRE_FALSE(samples.empty());
  for (const auto& s : samples) CHECK(s.request_id == reqs[0].id);
}

TEST_CASE("Exact partial steps measure exactly zero", "[shadow][integration]") {
  // tau = 0: every step that commits a token (entropy > 0) makes the next step full, so a
  // partial step only ever follows a step that committed nothing, on an unchanged canvas
  // whose cache the full step made exact. Dream's count schedule with more steps than tokens
  // has such empty steps. The partial step then equals the full one bit for bit.
  RecordingObserver observer;
  auto engine = MakeEngine("dream_gqa", 1.0f, &observer, 1);
  GenerationRequest r;
  r.id = "exact";
  r.prompt_ids = {5, 77, 123, 9, 42, 250, 17, 3};
  r.max_new_tokens = 8;
  r.decoding.schedule = Schedule::kTimestep;
  r.decoding.remasking = Remasking::kEntropy;
  r.decoding.steps = 32;
  r.cache = testing::EntropyCache(0.0f, 2);
  const FinalEvent f = RunAll(*engine, {r})[0];
  REQUIRE(f.stats.partial_steps > 0);
  const auto samples = observer.samples();
  REQUIRE(static_cast<int>(samples.size()) == f.stats.partial_steps);
  for (const auto& s : samples) {
    INFO("step " << s.step);
    CHECK(s.entropy == 0.0);
    CHECK(s.predicted_rows > 0);
    CHECK(s.kl_mean == 0.0);
    CHECK(s.kl_max == 0.0);
    CHECK_FALSE(s.decision_mismatch);
    CHECK_FALSE(s.token_mismatch);
    CHECK(s.max_prob_change == 0.0);
    for (int region = 0; region < kShadowRegions; ++region) {
      CHECK(s.drift[region].kv == 0.0);
    }
    CHECK(s.drift[kShadowPrompt].positions > 0);
    CHECK(s.drift[kShadowRecomputed].positions > 0);
  }
}

TEST_CASE("A stale cache shows drift, KL and mismatches", "[shadow][integration]") {
  // tau = +inf, k = 0: one full step, then partial steps refreshing only the window and the
  // last step's commits. The prompt and older answer tokens go stale.
  for (const std::string fixture : {"llada_mha", "dream_gqa"}) {
    INFO(fixture);
    RecordingObserver observer;
    auto engine = MakeEngine(fixture, 1.0f, &observer, 1);
    std::vector<GenerationRequest> reqs;
    for (int i = 0; i < 6; ++i) {
      GenerationRequest r;
      r.id = "stale" + std::to_string(i);
      for (int j = 0; j < 6 + i; ++j) r.prompt_ids.push_back(11 + 29 * j + 3 * i);
      r.max_new_tokens = 24;
      r.decoding.schedule = Schedule::kWindow;
      r.decoding.window = 4;
      r.cache = testing::EntropyCache(std::numeric_limits<float>::infinity(), 0);
      reqs.push_back(r);
    }
    RunAll(*engine, reqs);
    const auto samples = observer.samples();
    REQUIRE(samples.size() > 10);
    int mismatches = 0, token_mismatches = 0, drifted = 0, kl_positive = 0;
    for (const auto& s : samples) {
      mismatches += s.decision_mismatch ? 1 : 0;
      token_mismatches += s.token_mismatch ? 1 : 0;
      // A different token at a committed position is a different commit set.
      CHECK((!s.token_mismatch || s.decision_mismatch));
      kl_positive += s.kl_mean > 0 ? 1 : 0;
      const auto& prompt = s.drift[kShadowPrompt];
      drifted += prompt.kv > 0 ? 1 : 0;
      // The first layer's K/V depend only on token and position: never stale.
      CHECK(s.drift_by_group[kShadowPrompt][kShadowFirst].kv == 0.0);
      CHECK(s.drift_by_group[kShadowPrompt][kShadowLast].kv >= 0.0);
    }
    CHECK(drifted > 0);
    CHECK(kl_positive > 0);
    CHECK(mismatches > 0);
    CHECK(token_mismatches > 0);
  }
}

TEST_CASE("Cost bound: at most one shadow per step", "[shadow][integration]") {
  RecordingObserver observer;
  auto engine = MakeEngine("llada_mha", 1.0f, &observer, 8);
  RunAll(*engine, Mix());
  const std::string events = observer.events();
  INFO(events);
  CHECK(events.find("SS") == std::string::npos);
  CHECK(events.find('S') != std::string::npos);
  CHECK(events.front() != 'S');
}

TEST_CASE("Cost bound: shadow time stays within shadow_max_time_fraction",
          "[shadow][integration]") {
  // A budget no run can repay: the first drawn shadow runs, none after it.
  RecordingObserver starved;
  auto engine = MakeEngine("llada_mha", 1.0f, &starved, 8, {}, 1e-9);
  const auto reference = RunAll(*engine, Mix());
  CHECK(starved.samples().size() == 1);

  // A real budget: shadow seconds <= fraction x step seconds + 2 x the longest shadow, and the
  // generations are those of the unbounded run.
  for (double fraction : {0.05, 0.5}) {
    RecordingObserver observer;
    auto bounded = MakeEngine("llada_mha", 1.0f, &observer, 8, {}, fraction);
    const auto finals = RunAll(*bounded, Mix());
    for (size_t i = 0; i < finals.size(); ++i) CHECK(finals[i].token_ids == reference[i].token_ids);
    double shadow_seconds = 0, longest = 0;
    for (const auto& s : observer.samples()) {
      shadow_seconds += s.seconds;
      longest = std::max(longest, s.seconds);
    }
    INFO("fraction " << fraction << ": " << observer.samples().size() << " samples, "
                     << shadow_seconds << " s of shadows, " << observer.step_seconds()
                     << " s of steps");
    CHECK_FALSE(observer.samples().empty());
    CHECK(shadow_seconds <= fraction * observer.step_seconds() + 2 * longest);
  }
}

TEST_CASE("Cost bound: no shadows while requests wait in the queue", "[shadow][integration]") {
  RecordingObserver observer;
  auto engine = MakeEngine("llada_mha", 1.0f, &observer, 1);
  std::vector<GenerationRequest> reqs = Mix();
  for (auto& r : reqs) r.cache = testing::EntropyCache(std::numeric_limits<float>::infinity(), 2);
  // The first request submits the other two from its first commit, so both wait in the queue
  // (one batch slot) for all of its partial steps; the second runs while the third waits.
  auto first = std::make_shared<CollectSink>();
  auto second = std::make_shared<CollectSink>();
  auto third = std::make_shared<CollectSink>();
  // Runs on the worker thread: Catch assertions are not thread-safe, so it only records.
  bool submitted = false;
  absl::Status submit_second, submit_third;
  first->on_commit = [&](const CommitEvent&) {
    if (submitted) return;
    submitted = true;
    submit_second = engine->Submit(reqs[1], second).status();
    submit_third = engine->Submit(reqs[2], third).status();
  };
  REQUIRE(engine->Submit(reqs[0], first).ok());
  const FinalEvent f0 = first->Wait();  // orders the worker's writes above before the reads
  REQUIRE(submit_second.ok());
  REQUIRE(submit_third.ok());
  const FinalEvent f1 = second->Wait();
  const FinalEvent f2 = third->Wait();
  REQUIRE(f0.stats.partial_steps > 0);
  REQUIRE(f1.stats.partial_steps > 0);
  REQUIRE(f2.stats.partial_steps > 0);
  const auto samples = observer.samples();
  REQUIRE_FALSE(samples.empty());
  for (const auto& s : samples) CHECK(s.request_id == reqs[2].id);
}

TEST_CASE("Tau autotuning: every shadow sample feeds the controller, which scales tau",
          "[shadow][integration][autotune]") {
  TauAutotuneOptions autotune;
  autotune.enabled = true;
  autotune.mismatch_budget = 0.001;
  autotune.window_samples = 2;
  autotune.step_factor = 2;
  RecordingObserver observer;
  auto engine = MakeEngine("llada_mha", 1.0f, &observer, 8, autotune);
  RunAll(*engine, Mix());
  const auto samples = observer.samples();
  REQUIRE(samples.size() >= 4);
  // An independent replica fed the same outcomes must agree after every sample.
  TauController replica(autotune);
  int mismatches = 0;
  for (const auto& s : samples) {
    replica.Observe(s.token_mismatch);
    mismatches += s.token_mismatch ? 1 : 0;
    CHECK(s.tau_scale == Approx(replica.scale()));
  }
  INFO(mismatches << " mismatches in " << samples.size() << " samples");
  // Budget 0.1%: the first count of >= 2 samples holding a mismatch has a lower bound above it.
  REQUIRE(mismatches > 0);
  CHECK(replica.scale() < 1.0f);

  // Off (the default): the scale stays 1.
  RecordingObserver off;
  auto plain = MakeEngine("llada_mha", 1.0f, &off, 8);
  RunAll(*plain, Mix());
  for (const auto& s : off.samples()) CHECK(s.tau_scale == 1.0);
}

TEST_CASE(
    "Under load: switched steps are shadowed while requests wait, and their own "
    "controller takes the switch back when they mismatch",
    "[shadow][integration][autotune][slo_tau]") {
  // One batch slot and a clock that moves 1 ms per read (the forecast depends on reads
  // only). The first request has a deadline its forecast cannot meet at ratio 1000, so it
  // switches at admission from tau -inf (every step full) to its tau under load, 100 nats
  // (every step partial, k 0: a stale cache that mismatches). Its first commit submits two
  // requests without deadlines, which wait for the slot.
  testing::StepClock clock;
  TauAutotuneOptions autotune;
  autotune.enabled = true;
  autotune.mismatch_budget = 0.001;
  autotune.window_samples = 2;
  autotune.step_factor = 10;  // tau under load 100, then 10, then 100 / 64 (min_scale)
  RecordingObserver observer;
  EngineOptions options;
  options.model_dir = std::string(DLLM_TEST_DATA_DIR) + "/reference/llada_mha";
  options.max_batch_sequences = 1;
  options.kv_budget_bytes = 64 << 20;
  options.cpu_threads = 1;
  options.shadow.sample_rate = 1.0f;
  options.shadow.tau_autotune = autotune;
  options.observer = &observer;
  options.tau_switch_slack_ratio = 1000;
  options.clock = &clock;
  auto created = Engine::Create(options);
  INFO(created.status().ToString());
  REQUIRE(created.ok());
  Engine& engine = **created;
  constexpr float kInf = std::numeric_limits<float>::infinity();
  auto request = [](const std::string& id, int tokens) {
    GenerationRequest r;
    r.id = id;
    for (int j = 0; j < 7; ++j) r.prompt_ids.push_back(11 + 29 * j);
    r.max_new_tokens = tokens;
    r.decoding.schedule = Schedule::kWindow;
    r.decoding.window = 4;
    r.cache = testing::EntropyCache(-kInf, 0);
    r.step_events = true;
    return r;
  };
  // Measurements for the forecast (no deadline: never switches; all full: no shadows).
  RunAll(engine, {request("warm", 8)});
  REQUIRE(observer.samples().empty());

  GenerationRequest at_risk = request("at_risk", 32);
  at_risk.cache.entropy_threshold_under_load = 100.0f;
  at_risk.deadline = clock.Now() + absl::Seconds(5);
  GenerationRequest later = request("later", 16);
  later.cache = testing::EntropyCache(kInf, 2);
  GenerationRequest last = later;
  last.id = "last";
  auto first = std::make_shared<CollectSink>();
  auto second = std::make_shared<CollectSink>();
  auto third = std::make_shared<CollectSink>();
  bool submitted = false;  // on the worker thread; read after first->Wait()
  absl::Status submit_second, submit_third;
  first->on_commit = [&](const CommitEvent&) {
    if (submitted) return;
    submitted = true;
    submit_second = engine.Submit(later, second).status();
    submit_third = engine.Submit(last, third).status();
  };
  REQUIRE(engine.Submit(at_risk, first).ok());
  const FinalEvent f0 = first->Wait();
  REQUIRE(submit_second.ok());
  REQUIRE(submit_third.ok());
  REQUIRE(second->Wait().status.ok());
  REQUIRE(third->Wait().status.ok());
  INFO(f0.status.ToString());
  REQUIRE(f0.status.ok());
  REQUIRE(f0.stats.tau_switch_step == 0);

  // The switched request was shadowed although two requests waited all along; the second
  // request, which ran while the third waited, was not.
  const auto samples = observer.samples();
  int switched = 0, switched_mismatches = 0;
  TauAutotuneOptions capped = autotune;
  capped.max_scale = 1;
  TauController own(autotune), under_load(capped);
  for (const auto& sample : samples) {
    CHECK(sample.request_id != "later");
    CHECK(sample.under_load == (sample.request_id == "at_risk"));
    // Each sample fed the controller of its kind only: replicas agree after every sample.
    TauController& replica = sample.under_load ? under_load : own;
    replica.Observe(sample.token_mismatch);
    CHECK(sample.tau_scale == Approx(replica.scale()));
    if (sample.under_load) {
      ++switched;
      switched_mismatches += sample.token_mismatch ? 1 : 0;
    }
  }
  INFO(switched_mismatches << " token mismatches in " << switched << " switched samples");
  REQUIRE(switched_mismatches > 0);
  REQUIRE(under_load.scale() < 1.0f);

  // The switched request planned at 100 nats until the budget moved, then lower; never
  // looser again (raising the scale takes evidence of a rate under half of 0.1%).
  const std::vector<StepEvent> steps = first->steps();
  REQUIRE(!steps.empty());
  CHECK(steps.front().tau_nats == 100.0f);
  float previous = 100.0f;
  for (const StepEvent& e : steps) {
    INFO("step " << e.step << ": tau " << e.tau_nats);
    CHECK((e.tau_nats == 100.0f || e.tau_nats == 10.0f || e.tau_nats == 100.0f / 64));
    CHECK(e.tau_nats <= previous);
    previous = e.tau_nats;
  }
  CHECK(previous < 100.0f);
}

TEST_CASE("Tau autotuning needs shadow samples", "[shadow][autotune]") {
  EngineOptions options;
  options.model_dir = std::string(DLLM_TEST_DATA_DIR) + "/reference/llada_mha";
  options.shadow.tau_autotune.enabled = true;
  auto engine = Engine::Create(options);
  CHECK_THAT(std::string(engine.status().message()), Catch::Contains("shadow_sample_rate"));
  options.shadow.sample_rate = 0.1f;
  options.shadow.tau_autotune.window_samples = 0;
  engine = Engine::Create(options);
  CHECK_THAT(std::string(engine.status().message()), Catch::Contains("window_samples"));
}

TEST_CASE("The shadow time budget must be positive", "[shadow]") {
  EngineOptions options;
  options.model_dir = std::string(DLLM_TEST_DATA_DIR) + "/reference/llada_mha";
  for (double bad : {0.0, -1.0, std::numeric_limits<double>::quiet_NaN()}) {
    options.shadow.max_time_fraction = bad;
    auto engine = Engine::Create(options);
    CHECK_THAT(std::string(engine.status().message()), Catch::Contains("shadow.max_time_fraction"));
  }
}

TEST_CASE("An executor without shadow steps runs the plain step and reports no sample",
          "[shadow]") {
  // The scripted fake keeps StepExecutor's UNIMPLEMENTED shadow methods: a drawn shadow falls
  // back to the plain forward, and the requests decode exactly as with shadows off.
  std::vector<GenerationRequest> reqs;
  for (int i = 0; i < 3; ++i) {
    GenerationRequest r;
    r.id = "fake" + std::to_string(i);
    for (int j = 0; j < 5 + i; ++j) r.prompt_ids.push_back(20 + j);
    r.max_new_tokens = 16;
    r.decoding.schedule = Schedule::kBlock;
    r.decoding.block_length = 8;
    r.cache = testing::EntropyCache(std::numeric_limits<float>::infinity(), 2);
    reqs.push_back(r);
  }
  std::vector<FinalEvent> finals[2];
  RecordingObserver observers[2];
  for (int on = 0; on < 2; ++on) {
    EngineOptions options;
    options.shadow.sample_rate = on ? 1.0f : 0.0f;
    options.observer = &observers[on];
    auto engine = CreateEngineForTesting(options, testing::FakeConfig(),
                                         std::make_unique<testing::FakeExecutor>(1 << 20),
                                         std::make_unique<testing::FakeTokenizer>());
    REQUIRE(engine.ok());
    finals[on] = RunAll(**engine, reqs);
  }
  for (int on = 0; on < 2; ++on) {
    CHECK(observers[on].samples().empty());
    CHECK(observers[on].events().find('T') != std::string::npos);
  }
  for (size_t i = 0; i < reqs.size(); ++i) {
    INFO("request " << i);
    REQUIRE(finals[1][i].stats.partial_steps > 0);  // shadows were drawn (rate 1)
    CHECK(finals[1][i].token_ids == finals[0][i].token_ids);
    CHECK(finals[1][i].stats.steps == finals[0][i].stats.steps);
    CHECK(finals[1][i].stats.rows_computed == finals[0][i].stats.rows_computed);
  }
}

}  // namespace
}  // namespace dllm
