// The engine worker against the scripted fake model (tests/support/fake_executor.h): cache-policy
// fidelity, batch invariance, cancellation, deadlines, queue bounds, admission and events.
#include "engine/scheduler/worker.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <thread>

#include "absl/strings/match.h"
#include "absl/synchronization/notification.h"
#include "engine/engine_impl.h"
#include "tests/engine/decoding/entropy_cache_params.h"
#include "tests/engine/scheduler/collect_sink.h"
#include "tests/support/fake_executor.h"

namespace dllm {
namespace {

using testing::BlockingSink;
using testing::CollectSink;
using testing::EntropyCache;
using testing::FakeConfig;
using testing::FakeExecutor;
using testing::FakeTokenizer;

struct Mode {
  std::string name;
  DecodingParams decoding;
  bool dream = false;
};

std::vector<Mode> AllModes() {
  std::vector<Mode> modes;
  auto block = [](int block_length, int steps, float threshold) {
    DecodingParams d;
    d.schedule = Schedule::kBlock;
    d.block_length = block_length;
    d.steps = steps;
    d.confidence_threshold = threshold;
    return d;
  };
  modes.push_back({"block vanilla", block(8, 0, 0), false});
  modes.push_back({"block 2/step", block(8, 16, 0), false});
  modes.push_back({"block threshold", block(8, 0, 0.6f), false});
  DecodingParams random = block(16, 0, 0);
  random.remasking = Remasking::kRandom;
  random.seed = 7;
  modes.push_back({"block random", random, false});
  DecodingParams sampled = block(8, 0, 0);
  sampled.temperature = 0.7f;
  sampled.seed = 11;
  modes.push_back({"block sampled", sampled, false});
  DecodingParams window;
  window.schedule = Schedule::kWindow;
  window.window = 6;
  window.confidence_threshold = 0.7f;
  modes.push_back({"window threshold", window, false});
  window.confidence_threshold = 0;
  window.steps = 12;
  modes.push_back({"window quota", window, true});
  for (Remasking r :
       {Remasking::kEntropy, Remasking::kMaskgitPlus, Remasking::kTopkMargin, Remasking::kOrigin}) {
    DecodingParams d;
    d.schedule = Schedule::kTimestep;
    d.remasking = r;
    d.steps = 20;
    d.seed = 3;
    modes.push_back({"timestep " + std::to_string(static_cast<int>(r)), d, true});
  }
  DecodingParams alg_temp;
  alg_temp.schedule = Schedule::kTimestep;
  alg_temp.remasking = Remasking::kEntropy;
  alg_temp.alg_temp = 0.5f;
  modes.push_back({"timestep alg_temp", alg_temp, true});
  return modes;
}

struct Harness {
  explicit Harness(bool dream = false, const EngineOptions& options = {},
                   const testing::FakeRowFn& fn = testing::HashRow) {
    auto executor = std::make_unique<FakeExecutor>(options.kv_budget_bytes, fn);
    fake = executor.get();
    auto created = CreateEngineForTesting(options, FakeConfig(dream), std::move(executor),
                                          std::make_unique<FakeTokenizer>());
    REQUIRE(created.ok());
    engine = std::move(*created);
  }
  std::unique_ptr<Engine> engine;
  FakeExecutor* fake;
};

GenerationRequest Request(const DecodingParams& d, CacheParams c = {}, int gen = 32,
                          int prompt_len = 5) {
  GenerationRequest r;
  for (int i = 0; i < prompt_len; ++i) r.prompt_ids.push_back(20 + i);
  r.max_new_tokens = gen;
  r.decoding = d;
  r.cache = c;
  return r;
}

FinalEvent RunOne(Engine& engine, GenerationRequest r) {
  auto sink = std::make_shared<CollectSink>();
  auto id = engine.Submit(std::move(r), sink);
  REQUIRE(id.ok());
  return sink->Wait();
}

TEST_CASE("tau = -inf reproduces no-cache decoding in every mode", "[scheduler][fidelity]") {
  int modes_that_differ_with_cache = 0;
  for (const Mode& mode : AllModes()) {
    INFO(mode.name);
    Harness h(mode.dream);
    const FinalEvent none = RunOne(*h.engine, Request(mode.decoding));
    const FinalEvent always = RunOne(
        *h.engine, Request(mode.decoding, EntropyCache(-std::numeric_limits<float>::infinity())));
    REQUIRE(none.status.ok());
    REQUIRE(always.status.ok());
    CHECK(always.token_ids == none.token_ids);
    CHECK(always.text == none.text);
    CHECK(always.stats.steps == none.stats.steps);
    CHECK(always.stats.partial_steps == 0);
    CHECK(always.stats.full_steps == none.stats.full_steps);
    // The fake is sensitive to stale rows: a never-refreshing cache changes outputs.
    const FinalEvent never = RunOne(
        *h.engine, Request(mode.decoding, EntropyCache(std::numeric_limits<float>::infinity())));
    REQUIRE(never.status.ok());
    CHECK(never.stats.partial_steps > 0);
    if (never.token_ids != none.token_ids) ++modes_that_differ_with_cache;
  }
  CHECK(modes_that_differ_with_cache >= 8);
}

TEST_CASE("Batch invariance under every policy and mixed lengths", "[scheduler][batch]") {
  std::vector<std::pair<GenerationRequest, bool>> requests;  // (request, dream-compatible)
  const std::vector<CacheParams> policies = [] {
    std::vector<CacheParams> p;
    p.push_back(CacheParams{});
    p.push_back(EntropyCache(0.8f, 3));
    CacheParams dual;
    dual.policy = CachePolicyKind::kDual;
    p.push_back(dual);
    CacheParams interval;
    interval.policy = CachePolicyKind::kInterval;
    interval.refresh_interval = 3;
    p.push_back(interval);
    CacheParams prefix;
    prefix.policy = CachePolicyKind::kPrefix;
    p.push_back(prefix);
    return p;
  }();
  for (bool dream : {false, true}) {
    std::vector<GenerationRequest> reqs;
    int i = 0;
    for (const Mode& mode : AllModes()) {
      for (const CacheParams& c : policies) {
        if ((c.policy == CachePolicyKind::kDual || c.policy == CachePolicyKind::kPrefix) &&
            mode.decoding.schedule != Schedule::kBlock)
          continue;
        if (++i % 3 != 0) continue;  // a spread of combinations keeps the test fast
        reqs.push_back(Request(mode.decoding, c, 16 + 16 * (i % 3), 3 + i % 5));
      }
    }
    INFO("dream=" << dream << " requests=" << reqs.size());
    std::vector<FinalEvent> alone;
    {
      EngineOptions options;
      options.max_batch_sequences = 1;
      Harness h(dream, options);
      for (const auto& r : reqs) alone.push_back(RunOne(*h.engine, r));
    }
    EngineOptions options;
    options.max_batch_sequences = 8;
    Harness h(dream, options);
    std::vector<std::shared_ptr<CollectSink>> sinks;
    for (const auto& r : reqs) {
      sinks.push_back(std::make_shared<CollectSink>());
      REQUIRE(h.engine->Submit(r, sinks.back()).ok());
    }
    for (size_t k = 0; k < reqs.size(); ++k) {
      const FinalEvent mixed = sinks[k]->Wait();
      INFO("request " << k);
      REQUIRE(mixed.status.ok());
      CHECK(mixed.token_ids == alone[k].token_ids);
      CHECK(mixed.stats.steps == alone[k].stats.steps);
      CHECK(mixed.stats.full_steps == alone[k].stats.full_steps);
      CHECK(mixed.stats.rows_computed == alone[k].stats.rows_computed);
    }
  }
}

TEST_CASE("Partial steps compute fewer rows and respect the policy", "[scheduler][policy]") {
  DecodingParams d;
  d.block_length = 8;
  Harness h;
  const FinalEvent none = RunOne(*h.engine, Request(d));
  CacheParams dual;
  dual.policy = CachePolicyKind::kDual;
  const FinalEvent dual_run = RunOne(*h.engine, Request(d, dual));
  CHECK(none.stats.rows_computed == int64_t{none.stats.steps} * (5 + 32));
  CHECK(dual_run.stats.full_steps <= 4);  // one per block
  CHECK(dual_run.stats.rows_computed < none.stats.rows_computed);
  CHECK(dual_run.stats.steps == dual_run.stats.full_steps + dual_run.stats.partial_steps);
  CHECK(dual_run.stats.decision_seconds >= 0);

  // Prefix: the same full steps as dual (block starts), each partial step recomputing the
  // block and the rest of the canvas: more rows than dual, fewer than none.
  CacheParams prefix;
  prefix.policy = CachePolicyKind::kPrefix;
  const FinalEvent prefix_run = RunOne(*h.engine, Request(d, prefix));
  CHECK(prefix_run.stats.full_steps == dual_run.stats.full_steps);
  CHECK(prefix_run.stats.rows_computed > dual_run.stats.rows_computed);
  CHECK(prefix_run.stats.rows_computed < none.stats.rows_computed);
}

TEST_CASE("Prefix and dual equal none when every block takes one step", "[scheduler][policy]") {
  // Blocks of one position, one token per step: every step starts a block, so both refresh
  // fully at every step and must reproduce the exact decode.
  DecodingParams d;
  d.block_length = 1;
  Harness h;
  const FinalEvent none = RunOne(*h.engine, Request(d));
  for (CachePolicyKind kind : {CachePolicyKind::kPrefix, CachePolicyKind::kDual}) {
    CacheParams c;
    c.policy = kind;
    const FinalEvent run = RunOne(*h.engine, Request(d, c));
    INFO(Name(kind));
    REQUIRE(run.status.ok());
    CHECK(run.token_ids == none.token_ids);
    CHECK(run.stats.partial_steps == 0);
    CHECK(run.stats.rows_computed == none.stats.rows_computed);
  }
}

TEST_CASE("A step cap ends every mode under every policy in one final step",
          "[scheduler][step_cap]") {
  constexpr int kCap = 4;
  for (const Mode& mode : AllModes()) {
    INFO(mode.name);
    Harness h(mode.dream);
    auto run_collecting = [&](const GenerationRequest& r) {
      auto sink = std::make_shared<CollectSink>();
      REQUIRE(h.engine->Submit(r, sink).ok());
      const FinalEvent final_event = sink->Wait();
      return std::make_pair(final_event, sink->commits());
    };
    const auto [uncapped, uncapped_commits] = run_collecting(Request(mode.decoding));
    REQUIRE(uncapped.status.ok());
    REQUIRE(uncapped.stats.steps > kCap);
    DecodingParams capped = mode.decoding;
    capped.max_denoising_steps = kCap;
    const auto [none, none_commits] = run_collecting(Request(capped));
    REQUIRE(none.status.ok());
    CHECK(none.reason == FinishReason::kStepLimit);
    CHECK(none.stats.steps == kCap);
    // Until the cap the schedule is the uncapped one; the final step commits every mask left,
    // so over the run every answer position is committed once.
    std::vector<int32_t> positions;
    for (const CommitEvent& e : none_commits) {
      if (e.step < kCap - 1) {
        const auto same = std::find_if(uncapped_commits.begin(), uncapped_commits.end(),
                                       [&](const CommitEvent& u) { return u.step == e.step; });
        REQUIRE(same != uncapped_commits.end());
        CHECK(same->positions == e.positions);
        CHECK(same->tokens == e.tokens);
      }
      positions.insert(positions.end(), e.positions.begin(), e.positions.end());
    }
    std::sort(positions.begin(), positions.end());
    std::vector<int32_t> every(32);
    std::iota(every.begin(), every.end(), 0);
    CHECK(positions == every);
    std::vector<CacheParams> policies = {EntropyCache(-std::numeric_limits<float>::infinity())};
    if (mode.decoding.schedule == Schedule::kBlock) {
      for (CachePolicyKind kind : {CachePolicyKind::kDual, CachePolicyKind::kPrefix}) {
        CacheParams c;
        c.policy = kind;
        policies.push_back(c);
      }
    }
    for (const CacheParams& c : policies) {
      INFO(Name(c.policy));
      GenerationRequest r = Request(capped, c);
      r.step_events = true;
      auto sink = std::make_shared<CollectSink>();
      REQUIRE(h.engine->Submit(r, sink).ok());
      const FinalEvent run = sink->Wait();
      REQUIRE(run.status.ok());
      CHECK(run.reason == FinishReason::kStepLimit);
      CHECK(run.stats.steps == kCap);
      const std::vector<StepEvent> steps = sink->steps();
      REQUIRE(steps.size() == kCap);
      // The final step predicts every mask left, so block-based caches refresh for it.
      CHECK(steps.back().full);
      if (c.policy == CachePolicyKind::kEntropy) CHECK(run.token_ids == none.token_ids);
    }
  }
}

TEST_CASE("A step cap that decoding never reaches changes nothing", "[scheduler][step_cap]") {
  DecodingParams d;
  d.block_length = 8;
  Harness h;
  const FinalEvent uncapped = RunOne(*h.engine, Request(d));
  REQUIRE(uncapped.status.ok());
  d.max_denoising_steps = uncapped.stats.steps + 1;
  const FinalEvent capped = RunOne(*h.engine, Request(d));
  REQUIRE(capped.status.ok());
  CHECK(capped.reason == uncapped.reason);
  CHECK(capped.reason != FinishReason::kStepLimit);
  CHECK(capped.token_ids == uncapped.token_ids);
  CHECK(capped.stats.steps == uncapped.stats.steps);
}

TEST_CASE("Cancellation ends a running request within a step and frees KV", "[scheduler][cancel]") {
  Harness h;
  auto sink = std::make_shared<CollectSink>();
  RequestId id = 0;
  absl::Notification submitted;
  Engine* engine = h.engine.get();
  sink->on_commit = [&](const CommitEvent& e) {
    if (e.step == 2) {
      submitted.WaitForNotification();
      engine->Cancel(id);
    }
  };
  auto got = h.engine->Submit(Request(DecodingParams{}), sink);
  REQUIRE(got.ok());
  id = *got;
  submitted.Notify();
  const FinalEvent final = sink->Wait();
  CHECK(absl::IsCancelled(final.status));
  CHECK(final.reason == FinishReason::kCancelled);
  CHECK(final.stats.steps == 3);  // cancelled before step 3 ran
  CHECK(h.fake->KvUsedBytes() == 0);
  CHECK(sink->finals() == 1);
  h.engine->Cancel(id);  // unknown/finished ids are ignored
  h.engine->Cancel(12345);
}

TEST_CASE("Deadlines end queued and running requests with DEADLINE_EXCEEDED",
          "[scheduler][deadline]") {
  Harness h;
  GenerationRequest past = Request(DecodingParams{});
  past.deadline = absl::Now() - absl::Seconds(1);
  const FinalEvent expired = RunOne(*h.engine, past);
  CHECK(absl::IsDeadlineExceeded(expired.status));
  CHECK(expired.reason == FinishReason::kDeadline);

  GenerationRequest running = Request(DecodingParams{});
  running.deadline = absl::Now() + absl::Seconds(1);
  auto sink = std::make_shared<CollectSink>();
  // The first commit outlasts the deadline, so the sequence expires before its next step.
  sink->on_commit = [deadline = running.deadline](const CommitEvent& e) {
    if (e.step == 0) absl::SleepFor(deadline - absl::Now() + absl::Milliseconds(20));
  };
  REQUIRE(h.engine->Submit(running, sink).ok());
  const FinalEvent final = sink->Wait();
  CHECK(absl::IsDeadlineExceeded(final.status));
  CHECK(final.stats.steps == 1);
  CHECK(h.fake->KvUsedBytes() == 0);
}

TEST_CASE("A queue at its bound rejects with RESOURCE_EXHAUSTED", "[scheduler][queue]") {
  EngineOptions options;
  options.max_batch_sequences = 1;
  options.queue_capacity = 2;
  Harness h(false, options);
  absl::Notification entered, release;
  auto blocker = BlockingSink(&entered, &release);
  REQUIRE(h.engine->Submit(Request(DecodingParams{}), blocker).ok());
  entered.WaitForNotification();  // the worker is inside step 0: the queue is empty
  std::vector<std::shared_ptr<CollectSink>> queued;
  for (int i = 0; i < 2; ++i) {
    queued.push_back(std::make_shared<CollectSink>());
    REQUIRE(h.engine->Submit(Request(DecodingParams{}), queued.back()).ok());
  }
  auto rejected = h.engine->Submit(Request(DecodingParams{}), std::make_shared<CollectSink>());
  CHECK(absl::IsResourceExhausted(rejected.status()));
  CHECK(std::string(rejected.status().message()).find("capacity 2") != std::string::npos);
  release.Notify();
  CHECK(blocker->Wait().status.ok());
  for (auto& s : queued) CHECK(s->Wait().status.ok());
}

TEST_CASE("Cancelling a queued request ends it before admission", "[scheduler][cancel]") {
  EngineOptions options;
  options.max_batch_sequences = 1;
  Harness h(false, options);
  absl::Notification entered, release;
  auto blocker = BlockingSink(&entered, &release);
  REQUIRE(h.engine->Submit(Request(DecodingParams{}), blocker).ok());
  entered.WaitForNotification();
  auto queued = std::make_shared<CollectSink>();
  auto id = h.engine->Submit(Request(DecodingParams{}), queued);
  REQUIRE(id.ok());
  h.engine->Cancel(*id);
  release.Notify();
  const FinalEvent final = queued->Wait();
  CHECK(absl::IsCancelled(final.status));
  CHECK(final.stats.steps == 0);
  CHECK(queued->commits().empty());
  CHECK(blocker->Wait().status.ok());
}

TEST_CASE("Admission respects the KV byte budget", "[scheduler][admission]") {
  class MaxBatch : public EngineObserver {
   public:
    void OnStep(const StepInfo& info) override {
      max_sequences = std::max(max_sequences, info.sequences);
      ++steps;
    }
    void OnQueue(const QueueInfo& info) override { max_kv = std::max(max_kv, info.kv_usage_ratio); }
    int max_sequences = 0;
    int steps = 0;
    double max_kv = 0;
  } observer;
  EngineOptions options;
  options.max_batch_sequences = 8;
  options.kv_budget_bytes =
      int64_t{2} * (5 + 32) * testing::kFakeBytesPerPosition;  // two sequences
  options.observer = &observer;
  {
    Harness h(false, options);
    // The first request holds the worker inside its step 0 until the other four are queued,
    // so that the budget, not the submitting thread's timing, decides how many run at once
    // (without it a fast worker could finish each request before the next arrived).
    absl::Notification entered, release;
    std::vector<std::shared_ptr<CollectSink>> sinks = {BlockingSink(&entered, &release)};
    REQUIRE(h.engine->Submit(Request(DecodingParams{}), sinks.back()).ok());
    entered.WaitForNotification();
    for (int i = 0; i < 4; ++i) {
      sinks.push_back(std::make_shared<CollectSink>());
      REQUIRE(h.engine->Submit(Request(DecodingParams{}), sinks.back()).ok());
    }
    release.Notify();
    for (auto& s : sinks) CHECK(s->Wait().status.ok());
    // Larger than the whole budget: rejected up front, as a client error (it can never run;
    // RESOURCE_EXHAUSTED / HTTP 429 would tell clients to retry).
    auto too_big =
        h.engine->Submit(Request(DecodingParams{}, {}, 128), std::make_shared<CollectSink>());
    CHECK(absl::IsInvalidArgument(too_big.status()));
    CHECK_THAT(std::string(too_big.status().message()),
               Catch::Contains("max_new_tokens") && Catch::Contains("engine.kv_budget_bytes"));
    h.engine->Drain(absl::Seconds(10));
  }
  CHECK(observer.max_sequences == 2);
  CHECK(observer.max_kv <= 1.0);
  CHECK(observer.steps > 0);
}

TEST_CASE("Step reports count each sequence's commits and predicted positions",
          "[scheduler][metrics]") {
  // The server's vLLM-style counters (committed tokens per sequence-step, canvas positions)
  // come from these fields: over a whole request they must add up to its canvas (every
  // position is committed once) and to the predicted rows its own stats report.
  class Steps : public EngineObserver {
   public:
    void OnStep(const StepInfo& info) override {
      absl::MutexLock lock(&mu);
      CHECK(info.committed_per_sequence.size() == static_cast<size_t>(info.sequences));
      int committed = 0;
      for (int n : info.committed_per_sequence) committed += n;
      CHECK(committed == static_cast<int>(info.committed_entropies.size()));
      committed_total += committed;
      predicted_total += info.predicted_positions;
      sequence_steps += info.sequences;
    }
    absl::Mutex mu;
    int committed_total = 0;
    int64_t predicted_total = 0;
    int sequence_steps = 0;
  } observer;
  EngineOptions options;
  options.observer = &observer;
  FinalEvent final_event;
  {
    Harness h(false, options);
    DecodingParams d;
    d.confidence_threshold = 0.5f;  // several tokens per step
    final_event = RunOne(*h.engine, Request(d, {}, 32));
    h.engine->Drain(absl::Seconds(10));
  }
  REQUIRE(final_event.status.ok());
  absl::MutexLock lock(&observer.mu);
  CHECK(observer.committed_total == 32);
  CHECK(observer.sequence_steps == final_event.stats.steps);
  CHECK(observer.predicted_total == final_event.stats.predicted_rows);
  CHECK(observer.predicted_total >= 32);
}

TEST_CASE("Drain finishes in-flight work, then refuses new requests", "[scheduler][drain]") {
  Harness h;
  std::vector<std::shared_ptr<CollectSink>> sinks;
  for (int i = 0; i < 3; ++i) {
    sinks.push_back(std::make_shared<CollectSink>());
    REQUIRE(h.engine->Submit(Request(DecodingParams{}), sinks.back()).ok());
  }
  h.engine->Drain(absl::Seconds(30));
  for (auto& s : sinks) {
    CHECK(s->finals() == 1);
    CHECK(s->Wait().status.ok());
  }
  auto late = h.engine->Submit(Request(DecodingParams{}), std::make_shared<CollectSink>());
  CHECK(absl::IsUnavailable(late.status()));
}

TEST_CASE("Drain timeout cancels what remains", "[scheduler][drain]") {
  Harness h;
  absl::Notification entered, release;
  auto blocker = BlockingSink(&entered, &release);
  REQUIRE(h.engine->Submit(Request(DecodingParams{}), blocker).ok());
  entered.WaitForNotification();
  std::thread releaser([&] {
    absl::SleepFor(absl::Milliseconds(50));
    release.Notify();
  });
  h.engine->Drain(absl::ZeroDuration());
  releaser.join();
  const FinalEvent final = blocker->Wait();
  CHECK(absl::IsCancelled(final.status));
  CHECK(h.fake->KvUsedBytes() == 0);
}

TEST_CASE("Destroying the engine cancels queued and running requests", "[scheduler][drain]") {
  auto sink = std::make_shared<CollectSink>();
  {
    Harness h;
    REQUIRE(h.engine->Submit(Request(DecodingParams{}, {}, 256), sink).ok());
  }
  CHECK(sink->finals() == 1);
}

TEST_CASE("A forward failure ends the batch with an error", "[scheduler][error]") {
  Harness h;
  h.fake->fail_next_ = true;
  const FinalEvent final = RunOne(*h.engine, Request(DecodingParams{}));
  CHECK(absl::IsInternal(final.status));
  CHECK(final.reason == FinishReason::kError);
  CHECK(h.fake->KvUsedBytes() == 0);
  CHECK(RunOne(*h.engine, Request(DecodingParams{})).status.ok());
}

TEST_CASE("An allocation failure in the forward ends the batch, not the process",
          "[scheduler][error]") {
  Harness h;
  h.fake->throw_bad_alloc_next_ = true;
  const FinalEvent final = RunOne(*h.engine, Request(DecodingParams{}));
  CHECK(absl::IsResourceExhausted(final.status));
  CHECK(absl::StrContains(final.status.message(), "out of host memory"));
  CHECK(final.reason == FinishReason::kError);
  CHECK(h.fake->KvUsedBytes() == 0);
  CHECK(RunOne(*h.engine, Request(DecodingParams{})).status.ok());
}

TEST_CASE("Commit events: answer positions, UTF-8-safe append-only text", "[scheduler][events]") {
  // Answer: "€" split over its three bytes' tokens, then 'A'..'D', then EOS. Positions are
  // committed right to left (confidence grows with position), so text appears only at the end.
  const int prompt = 5;
  const std::vector<int32_t> answer = {testing::ByteToken(0xE2), testing::ByteToken(0x82),
                                       testing::ByteToken(0xAC), testing::ByteToken('A'),
                                       testing::ByteToken('B'),  testing::ByteToken('C'),
                                       testing::ByteToken('D')};
  auto fn = [&answer](std::span<const uint64_t>, int32_t pos, const SequenceStep&) {
    const int i = pos - prompt;
    RowStats r;
    r.token = r.argmax_token = i < static_cast<int>(answer.size()) ? answer[i] : testing::kFakeEos;
    r.token_prob = r.argmax_prob = 0.1f + 0.01f * i;
    r.entropy_nats = 0.2f;
    return r;
  };
  Harness h(false, EngineOptions{}, fn);
  DecodingParams d;
  d.block_length = 8;
  GenerationRequest r = Request(d, {}, 8);
  r.snapshot_every_steps = 2;
  auto sink = std::make_shared<CollectSink>();
  REQUIRE(h.engine->Submit(r, sink).ok());
  const FinalEvent final = sink->Wait();
  REQUIRE(final.status.ok());
  CHECK(final.reason == FinishReason::kEos);
  CHECK(final.token_ids == answer);
  CHECK(final.text ==
        "\xE2\x82\xAC"
        "ABCD");
  CHECK(final.stats.generated_tokens == 7);
  std::string joined;
  const auto commits = sink->commits();
  REQUIRE(!commits.empty());
  CHECK(commits[0].positions == std::vector<int32_t>{7});  // rightmost first
  for (const auto& c : commits) joined += c.text_delta;
  CHECK(joined == final.text);
  // Before the last commit (position 0) nothing is decided-prefix text.
  for (size_t i = 0; i + 1 < commits.size(); ++i) CHECK(commits[i].text_delta.empty());
  const auto snaps = sink->snapshots();
  REQUIRE(!snaps.empty());
  CHECK(snaps[0].canvas_text.find("\xE2\x96\x92") != std::string::npos);  // masks shown
}

TEST_CASE("Submit validates requests and names the field", "[scheduler][validation]") {
  EngineOptions options;
  options.max_new_tokens_limit = 100;
  Harness h(false, options);
  auto sink = std::make_shared<CollectSink>();
  auto expect = [&](GenerationRequest r, absl::StatusCode code, const std::string& fragment) {
    auto got = h.engine->Submit(std::move(r), sink);
    INFO(got.status().ToString());
    CHECK(got.status().code() == code);
    CHECK(std::string(got.status().message()).find(fragment) != std::string::npos);
  };
  DecodingParams d;
  d.block_length = 8;
  expect(Request(d, {}, 101), absl::StatusCode::kInvalidArgument,
         "max_new_tokens: 101 is outside [1, 100]");
  expect(Request(d, {}, 0), absl::StatusCode::kInvalidArgument,
         "max_new_tokens: 0 is outside [1, 100]");
  GenerationRequest bad_id = Request(d);
  bad_id.prompt_ids[1] = testing::kFakeVocab;  // one past the vocabulary
  expect(bad_id, absl::StatusCode::kInvalidArgument,
         "prompt_ids[1] = " + std::to_string(testing::kFakeVocab));
  GenerationRequest masked = Request(d);
  masked.prompt_ids[0] = testing::kFakeMask;
  expect(masked, absl::StatusCode::kInvalidArgument, "mask token");
  expect(Request(d, {}, 96, 500), absl::StatusCode::kInvalidArgument, "max positions (512)");
  GenerationRequest empty;
  expect(empty, absl::StatusCode::kInvalidArgument, "no input");
  DecodingParams bad_block = d;
  bad_block.block_length = 7;
  expect(Request(bad_block), absl::StatusCode::kInvalidArgument,
         "decoding.block_length: 7 must divide max_new_tokens (32)");
  GenerationRequest text;
  text.prompt_text = "hello";
  text.decoding = d;
  text.max_new_tokens = 8;
  CHECK(h.engine->Submit(text, std::make_shared<CollectSink>()).ok());
  CHECK(sink->finals() == 0);  // rejected requests never get events
  auto ids = h.engine->TokenizeInput(text);
  REQUIRE(ids.ok());
  CHECK(ids->size() == 5);
}

}  // namespace
}  // namespace dllm

namespace dllm {
namespace {

// Step events (GenerationRequest::step_events, the playground's stream) must tell the same
// story as the final statistics and the commit events, in every decoding mode.
TEST_CASE("step events: one per step, matching the commits and the statistics",
          "[scheduler][events]") {
  for (const Mode& mode : AllModes()) {
    for (const CacheParams& cache : {CacheParams{}, EntropyCache(0.3f, 2)}) {
      INFO(mode.name << (cache.policy == CachePolicyKind::kEntropy ? " entropy" : " none"));
      Harness h(mode.dream);
      GenerationRequest r = Request(mode.decoding, cache, 32);
      r.step_events = true;
      auto sink = std::make_shared<CollectSink>();
      REQUIRE(h.engine->Submit(r, sink).ok());
      const FinalEvent final = sink->Wait();
      REQUIRE(final.status.ok());
      const std::vector<StepEvent> steps = sink->steps();
      REQUIRE(static_cast<int>(steps.size()) == final.stats.steps);
      int full = 0;
      int64_t rows = 0;
      float max_entropy = 0;
      std::map<int32_t, int32_t> committed;  // position -> token, over all steps
      for (size_t i = 0; i < steps.size(); ++i) {
        const StepEvent& e = steps[i];
        CHECK(e.step == static_cast<int>(i));
        full += e.full ? 1 : 0;
        rows += e.rows;
        CHECK(e.rows > 0);
        CHECK(0 <= e.window_begin);
        CHECK(e.window_begin <= e.window_end);
        CHECK(e.window_end <= 32);
        if (cache.policy == CachePolicyKind::kEntropy) {
          CHECK(e.tau_nats == 0.3f);
        } else {
          CHECK(std::isnan(e.tau_nats));
        }
        REQUIRE(e.committed_positions.size() == e.committed_tokens.size());
        for (size_t j = 0; j < e.committed_positions.size(); ++j) {
          CHECK(committed.emplace(e.committed_positions[j], e.committed_tokens[j]).second);
        }
        max_entropy = std::max(max_entropy, e.max_committed_entropy);
        REQUIRE(e.provisional_positions.size() == e.provisional_tokens.size());
        for (int32_t p : e.provisional_positions) {
          CHECK(committed.count(p) == 0);  // proposals are for positions still masked
          CHECK((0 <= p && p < 32));
        }
      }
      CHECK(full == final.stats.full_steps);
      CHECK(rows == final.stats.rows_computed);
      CHECK(static_cast<double>(max_entropy) == Approx(final.stats.max_committed_entropy));
      CHECK(steps.front().full);  // the first step of any policy computes every row
      // The step events' commits are the commit events', step by step; each commit event
      // carries one entropy per token, whose per-step max is the step event's, and whose
      // mean over all tokens is the final statistics'.
      std::map<int32_t, int32_t> from_commits;
      std::map<int, float> step_max;
      double entropy_sum = 0;
      int entropy_n = 0;
      for (const CommitEvent& c : sink->commits()) {
        REQUIRE(c.entropy_nats.size() == c.tokens.size());
        for (size_t j = 0; j < c.positions.size(); ++j) {
          from_commits[c.positions[j]] = c.tokens[j];
          CHECK(c.entropy_nats[j] >= 0.0f);
          step_max[c.step] = std::max(step_max[c.step], c.entropy_nats[j]);
          entropy_sum += c.entropy_nats[j];
          ++entropy_n;
        }
      }
      CHECK(committed == from_commits);
      for (const auto& [step, max] : step_max) CHECK(steps.at(step).max_committed_entropy == max);
      CHECK(entropy_sum / entropy_n == Approx(final.stats.mean_committed_entropy));
      // Every step predicts its candidates: at least one row, at most the answer length.
      CHECK(final.stats.predicted_rows >= final.stats.steps);
      CHECK(final.stats.predicted_rows <= int64_t{final.stats.steps} * 32);
      // The answer is the committed tokens up to the first end token.
      for (size_t p = 0; p < final.token_ids.size(); ++p) {
        CHECK(committed.at(static_cast<int32_t>(p)) == final.token_ids[p]);
      }
    }
  }
}

TEST_CASE("step events are off unless asked for", "[scheduler][events]") {
  Harness h;
  auto sink = std::make_shared<CollectSink>();
  REQUIRE(h.engine->Submit(Request(AllModes()[0].decoding, {}, 16), sink).ok());
  REQUIRE(sink->Wait().status.ok());
  CHECK(sink->steps().empty());
}

}  // namespace
}  // namespace dllm

namespace dllm {
namespace {

TEST_CASE("Attention-based policies are refused where the executor has no attention maps",
          "[worker]") {
  Harness h;  // the fake executor computes no attention maps
  for (CachePolicyKind kind : {CachePolicyKind::kD2Cache, CachePolicyKind::kElastic}) {
    CacheParams c;
    c.policy = kind;
    auto got = h.engine->Submit(Request(DecodingParams{}, c), std::make_shared<CollectSink>());
    REQUIRE_FALSE(got.ok());
    CHECK(got.status().code() == absl::StatusCode::kFailedPrecondition);
    CHECK(got.status().message().find(std::string("cache.policy ") + Name(kind)) !=
          std::string::npos);
  }
}

}  // namespace
}  // namespace dllm
