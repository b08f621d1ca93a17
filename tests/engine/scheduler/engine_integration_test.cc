// The engine end to end on the real forward pass (CPU backend) with the random-weight
// fixtures of tests/data/reference: generations equal the independent PyTorch sampler's
// (gen_reference_generations.py), tau = -inf equals no cache, batch invariance.
#include <catch2/catch.hpp>
#include <cmath>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "engine/core/row_stats.h"
#include "engine/engine.h"
#include "engine/model/model_config.h"
#include "tests/engine/decoding/entropy_cache_params.h"
#include "tests/engine/scheduler/collect_sink.h"

namespace dllm {
namespace {

using testing::CollectSink;

std::string FixtureDir(const std::string& name) {
  return std::string(DLLM_TEST_DATA_DIR) + "/reference/" + name;
}

std::unique_ptr<Engine> MakeEngine(const std::string& fixture, int batch = 8) {
  EngineOptions options;
  options.model_dir = FixtureDir(fixture);
  options.max_batch_sequences = batch;
  options.kv_budget_bytes = 64 << 20;
  options.cpu_threads = 1;
  auto engine = Engine::Create(options);
  INFO(engine.status().ToString());
  REQUIRE(engine.ok());
  return std::move(*engine);
}

FinalEvent RunOne(Engine& engine, const GenerationRequest& r) {
  auto sink = std::make_shared<CollectSink>();
  auto id = engine.Submit(r, sink);
  INFO(id.status().ToString());
  REQUIRE(id.ok());
  FinalEvent f = sink->Wait();
  INFO(f.status.ToString());
  REQUIRE(f.status.ok());
  return f;
}

std::vector<int32_t> CutAtEnd(const std::vector<int32_t>& ids, const ModelInfo& info) {
  std::vector<int32_t> out;
  for (int32_t id : ids) {
    if (std::find(info.end_token_ids.begin(), info.end_token_ids.end(), id) !=
        info.end_token_ids.end())
      break;
    out.push_back(id);
  }
  return out;
}

TEST_CASE("Engine generations equal the PyTorch reference sampler on the fixtures",
          "[engine][integration]") {
  std::ifstream in(std::string(DLLM_SOURCE_DIR) +
                   "/tests/engine/scheduler/data/reference_generations.json");
  REQUIRE(in.good());
  std::stringstream buffer;
  buffer << in.rdbuf();
  const nlohmann::json cases = nlohmann::json::parse(buffer.str())["cases"];
  std::map<std::string, std::unique_ptr<Engine>> engines;
  int checked = 0;
  int logprobs_checked = 0;
  int suffix_checked = 0;
  int canvas_checked = 0;
  for (const auto& c : cases) {
    const std::string fixture = c["fixture"];
    if (!engines.count(fixture)) engines[fixture] = MakeEngine(fixture);
    Engine& engine = *engines[fixture];
    const ModelInfo& info = engine.model_info();
    const std::vector<int32_t> want_full = c["output_ids"].get<std::vector<int32_t>>();
    // Skip near-ties (fp32 vs fp64) and proposals of the mask id (the reference re-masks them).
    if (c["min_gap"].get<double>() < 1e-6 || c["mask_committed"].get<bool>()) continue;
    GenerationRequest r;
    r.prompt_ids = c["prompt_ids"].get<std::vector<int32_t>>();
    r.max_new_tokens = c["gen_length"];
    DecodingParams d;
    if (c["mode"] == "llada_block") {
      d.schedule = Schedule::kBlock;
      d.remasking = Remasking::kLowConfidence;
      d.block_length = c["block_length"];
    } else {
      d.schedule = Schedule::kTimestep;
      const std::string alg = c["alg"];
      d.remasking = alg == "entropy"       ? Remasking::kEntropy
                    : alg == "topk_margin" ? Remasking::kTopkMargin
                                           : Remasking::kMaskgitPlus;
      d.eps = 1e-3f;
    }
    d.steps = c["steps"];
    r.decoding = d;
    if (c.contains("suffix")) {
      r.suffix_ids = c["suffix"].get<std::vector<int32_t>>();  // infilling
      ++suffix_checked;
    }
    if (c.contains("canvas")) {  // a seeded answer: null marks a position to generate
      for (const auto& t : c["canvas"]) {
        r.canvas.push_back(t.is_null() ? info.mask_token_id : t.get<int32_t>());
      }
      ++canvas_checked;
    }
    INFO(fixture << " " << c["mode"] << " steps=" << c["steps"] << " prompt "
                 << c["prompt_ids"].dump());
    r.logprobs = 5;
    const FinalEvent f = RunOne(engine, r);
    CHECK(f.token_ids == CutAtEnd(want_full, info));
    // Each answer token's logprob at the step that committed it, and the five most probable
    // tokens there, against the reference's float64 log_softmax.
    REQUIRE(f.logprobs.size() == f.token_ids.size());
    for (size_t i = 0; i < f.logprobs.size(); ++i) {
      INFO("answer position " << i);
      const nlohmann::json& want = c["logprobs"][i];
      const TokenLogprob& got = f.logprobs[i];
      CHECK(got.token == f.token_ids[i]);
      if (want.is_null()) {  // a fixed token of a seeded canvas: never predicted
        CHECK(got.logprob == 0.0f);
        CHECK(got.top.empty());
        continue;
      }
      CHECK(got.logprob == Approx(want["logprob"].get<double>()).margin(1e-4));
      REQUIRE(got.top.size() == 5);
      const std::vector<double> want_top = want["top_logprobs"].get<std::vector<double>>();
      const std::vector<int32_t> want_ids = want["top_ids"].get<std::vector<int32_t>>();
      for (size_t k = 0; k < 5; ++k) {
        INFO("rank " << k);
        CHECK(got.top[k].logprob == Approx(want_top[k]).margin(1e-4));
        // Ids must agree where the reference's neighbours are apart by more than the noise.
        const bool near_tie = (k > 0 && want_top[k - 1] - want_top[k] < 1e-4) ||
                              (k + 1 < 5 && want_top[k] - want_top[k + 1] < 1e-4);
        if (!near_tie) CHECK(got.top[k].token == want_ids[k]);
        ++logprobs_checked;
      }
    }
    ++checked;
  }
  CHECK(checked >= 20);
  CHECK(logprobs_checked >= 20 * 16 * 5 / 2);
  CHECK(suffix_checked >= 12);
  CHECK(canvas_checked >= 6);
}

struct Mode {
  DecodingParams d;
};

std::vector<DecodingParams> Modes() {
  std::vector<DecodingParams> out;
  DecodingParams block;
  block.block_length = 4;
  out.push_back(block);
  block.confidence_threshold = 0.005f;  // random weights: tiny probabilities
  out.push_back(block);
  DecodingParams window;
  window.schedule = Schedule::kWindow;
  window.window = 4;
  window.confidence_threshold = 0.005f;
  out.push_back(window);
  DecodingParams timestep;
  timestep.schedule = Schedule::kTimestep;
  timestep.remasking = Remasking::kEntropy;
  timestep.steps = 10;
  out.push_back(timestep);
  DecodingParams sampled = block;
  sampled.confidence_threshold = 0;
  sampled.temperature = 0.8f;
  sampled.seed = 5;
  out.push_back(sampled);
  return out;
}

// A 6-token prompt and a 16-token answer, decoded with `mode`.
GenerationRequest ShortRequest(const DecodingParams& mode) {
  GenerationRequest r;
  for (int j = 0; j < 6; ++j) r.prompt_ids.push_back(11 + 13 * j);
  r.max_new_tokens = 16;
  r.decoding = mode;
  return r;
}

TEST_CASE("Real forward: tau = -inf reproduces no cache; partial steps run",
          "[engine][integration]") {
  for (const std::string fixture : {"llada_mha", "dream_gqa"}) {
    auto engine = MakeEngine(fixture);
    for (const DecodingParams& d : Modes()) {
      GenerationRequest r;
      r.prompt_ids = {5, 77, 123, 9, 42, 250, 17, 3, 99, 100};
      r.max_new_tokens = 16;
      r.decoding = d;
      INFO(fixture << " schedule " << static_cast<int>(d.schedule));
      const FinalEvent none = RunOne(*engine, r);
      r.cache = testing::EntropyCache(-std::numeric_limits<float>::infinity(), 4);
      const FinalEvent always = RunOne(*engine, r);
      CHECK(always.token_ids == none.token_ids);
      CHECK(always.stats.steps == none.stats.steps);
      CHECK(always.stats.partial_steps == 0);
      r.cache = testing::EntropyCache(std::numeric_limits<float>::infinity(), 4);
      const FinalEvent cached = RunOne(*engine, r);
      CHECK(cached.stats.partial_steps > 0);
      CHECK(cached.stats.rows_computed < none.stats.rows_computed);
    }
  }
}

// A temperature so small that logits / temperature overflows float (1e-39 is denormal) once
// sampled ties among infinities: garbage instead of the near-greedy answer it asks for.
TEST_CASE("Real forward: temperatures below kGreedyBelowTemperature decode greedily",
          "[engine][integration]") {
  CHECK(EffectiveTemperature(kGreedyBelowTemperature) == kGreedyBelowTemperature);
  CHECK(EffectiveTemperature(std::nextafter(kGreedyBelowTemperature, 0.0f)) == 0.0f);
  CHECK(EffectiveTemperature(0.0f) == 0.0f);
  CHECK(EffectiveTemperature(0.7f) == 0.7f);
  for (const std::string fixture : {"llada_mha", "dream_gqa"}) {
    auto engine = MakeEngine(fixture);
    GenerationRequest r;
    r.prompt_ids = {5, 77, 123, 9, 42, 250, 17, 3, 99, 100};
    r.max_new_tokens = 16;
    r.decoding.block_length = 16;
    r.decoding.seed = 3;
    const FinalEvent greedy = RunOne(*engine, r);
    for (float t : {1e-39f, 1e-30f, std::nextafter(kGreedyBelowTemperature, 0.0f)}) {
      INFO(fixture << " temperature " << t);
      r.decoding.temperature = t;
      CHECK(RunOne(*engine, r).token_ids == greedy.token_ids);
    }
    // Dream's position sampling temperature follows the same rule.
    r.decoding = DecodingParams{};
    r.decoding.schedule = Schedule::kTimestep;
    r.decoding.remasking = Remasking::kEntropy;
    r.decoding.steps = 8;
    r.decoding.seed = 3;
    const FinalEvent ordered = RunOne(*engine, r);
    r.decoding.alg_temp = 1e-39f;
    CHECK(RunOne(*engine, r).token_ids == ordered.token_ids);
  }
}

TEST_CASE("Real forward: batch invariance across policies and lengths", "[engine][integration]") {
  for (const std::string fixture : {"llada_mha", "dream_gqa"}) {
    std::vector<GenerationRequest> reqs;
    const std::vector<DecodingParams> modes = Modes();
    for (int i = 0; i < 14; ++i) {
      GenerationRequest r;
      for (int j = 0; j < 4 + 3 * i % 7; ++j) r.prompt_ids.push_back(10 + 17 * j + i);
      r.max_new_tokens = 8 * (1 + i % 3);
      // Policies cycle none, entropy, interval, dual, prefix, d2cache, elastic; dual and prefix
      // need a block mode.
      const int policy = i % 7;
      r.decoding = policy == 3 || policy == 4 ? modes[i % 2] : modes[i % modes.size()];
      if (r.decoding.schedule == Schedule::kBlock) r.decoding.block_length = 8;
      switch (policy) {
        case 1:
          r.cache = testing::EntropyCache(0.5f, 3);
          break;
        case 2:
          r.cache.policy = CachePolicyKind::kInterval;
          r.cache.refresh_interval = 3;
          break;
        case 3:
          r.cache.policy = CachePolicyKind::kDual;
          break;
        case 4:
          r.cache.policy = CachePolicyKind::kPrefix;
          break;
        case 5:
          r.cache.policy = CachePolicyKind::kD2Cache;
          r.cache.d2_current_k = 4;  // smaller than the answers, so steps are partial
          break;
        case 6:
          r.cache.policy = CachePolicyKind::kElastic;
          r.cache.elastic_gamma = i < 7 ? 1.0f : 0.9f;  // 1: a recompute pass on every drift
          break;
        default:
          break;
      }
      reqs.push_back(r);
    }
    std::vector<FinalEvent> alone;
    {
      auto engine = MakeEngine(fixture, 1);
      for (const auto& r : reqs) alone.push_back(RunOne(*engine, r));
    }
    auto engine = MakeEngine(fixture, 8);
    std::vector<std::shared_ptr<CollectSink>> sinks;
    for (const auto& r : reqs) {
      sinks.push_back(std::make_shared<CollectSink>());
      REQUIRE(engine->Submit(r, sinks.back()).ok());
    }
    for (size_t i = 0; i < reqs.size(); ++i) {
      INFO(fixture << " request " << i);
      const FinalEvent f = sinks[i]->Wait();
      REQUIRE(f.status.ok());
      CHECK(f.token_ids == alone[i].token_ids);
      CHECK(f.stats.full_steps == alone[i].stats.full_steps);
    }
  }
}

TEST_CASE("Real forward: d2cache over every row equals none; at its defaults it is partial",
          "[engine][integration]") {
  for (const std::string fixture : {"llada_mha", "dream_gqa"}) {
    auto engine = MakeEngine(fixture, 1);
    for (const DecodingParams& mode : Modes()) {
      INFO(fixture << " schedule " << Name(mode.schedule));
      GenerationRequest r = ShortRequest(mode);
      if (r.decoding.schedule == Schedule::kBlock) r.decoding.block_length = 8;
      const FinalEvent vanilla = RunOne(*engine, r);
      REQUIRE(vanilla.status.ok());
      // Every mask (current_k >= the answer) and the whole nucleus (rollout_p 1): each step
      // recomputes every row, so the partial steps must equal full ones bit for bit.
      r.cache.policy = CachePolicyKind::kD2Cache;
      r.cache.d2_current_k = 16;
      r.cache.d2_rollout_p = 1.0f;
      const FinalEvent all_rows = RunOne(*engine, r);
      REQUIRE(all_rows.status.ok());
      CHECK(all_rows.token_ids == vanilla.token_ids);
      CHECK(all_rows.stats.full_steps == 1);
      CHECK(all_rows.stats.rows_computed == vanilla.stats.rows_computed);
      // The defaults recompute fewer rows, and the attention maps are charged as decision
      // time.
      r.cache.d2_current_k = 32;
      r.cache.d2_rollout_p = 0.1f;
      const FinalEvent defaults = RunOne(*engine, r);
      REQUIRE(defaults.status.ok());
      CHECK(defaults.stats.rows_computed < vanilla.stats.rows_computed);
      CHECK(defaults.stats.decision_seconds > 0);
    }
  }
}

TEST_CASE("Admission counts the attention maps of d2cache and elastic in the KV budget",
          "[engine][integration]") {
  // A sequence under d2cache holds [layers][positions][positions] floats of attention maps
  // (elastic twice that) besides its K/V; they used to sit outside the budget (32 sequences on
  // the cot models: 1,177 MB RSS against 619 MB for none, with the same KV in use).
  const int positions = 64;  // the fixture's maximum
  absl::StatusOr<ModelConfig> config = LoadModelConfig(FixtureDir("llada_mha"));
  REQUIRE(config.ok());
  const int64_t kv_bytes = config->kv_layout().SlabElements(positions, false) * 4;  // fp32 (cpu)
  const int64_t maps_bytes = int64_t{config->num_layers} * positions * positions * 4;
  EngineOptions options;
  options.model_dir = FixtureDir("llada_mha");
  options.max_batch_sequences = 1;
  options.cpu_threads = 1;
  // One byte short of a d2cache sequence's K/V and maps.
  options.kv_budget_bytes = kv_bytes + maps_bytes - 1;
  auto engine = Engine::Create(options);
  REQUIRE(engine.ok());
  GenerationRequest r = ShortRequest(DecodingParams{});
  r.prompt_ids.push_back(7);
  r.prompt_ids.push_back(8);
  r.max_new_tokens = positions - static_cast<int>(r.prompt_ids.size());  // 56
  r.decoding.block_length = 8;
  for (const CachePolicyKind policy : {CachePolicyKind::kD2Cache, CachePolicyKind::kElastic}) {
    r.cache.policy = policy;
    INFO(Name(policy));
    auto refused = (*engine)->Submit(r, std::make_shared<CollectSink>());
    CHECK(absl::IsInvalidArgument(refused.status()));
    CHECK_THAT(std::string(refused.status().message()),
               Catch::Contains("attention maps") && Catch::Contains("engine.kv_budget_bytes"));
  }
  // The same request under a policy without maps fits (its K/V is far smaller).
  r.cache.policy = CachePolicyKind::kEntropy;
  CHECK(RunOne(**engine, r).status.ok());
}

TEST_CASE("Real forward: elastic recomputes deep layers when attention drifts",
          "[engine][integration]") {
  for (const std::string fixture : {"llada_mha", "dream_gqa"}) {
    auto engine = MakeEngine(fixture, 1);
    for (const DecodingParams& mode : Modes()) {
      INFO(fixture << " schedule " << Name(mode.schedule));
      GenerationRequest r = ShortRequest(mode);
      r.cache.policy = CachePolicyKind::kNone;
      const FinalEvent vanilla = RunOne(*engine, r);
      REQUIRE(vanilla.status.ok());
      r.cache.policy = CachePolicyKind::kElastic;
      r.cache.elastic_gamma = -1.0f;  // never drifts: window, commits and tracked tokens only
      const FinalEvent never = RunOne(*engine, r);
      REQUIRE(never.status.ok());
      CHECK(never.stats.full_steps == 1);
      CHECK(never.stats.rows_computed < vanilla.stats.rows_computed);
      CHECK(never.stats.decision_seconds > 0);
      // gamma 1: any change of a tracked token's attention recomputes the deep layers.
      r.cache.elastic_gamma = 1.0f;
      const FinalEvent always = RunOne(*engine, r);
      REQUIRE(always.status.ok());
      CHECK(always.stats.full_steps == 1);
      if (always.stats.steps > 2) {
        CHECK(always.stats.rows_computed > never.stats.rows_computed);
      }
    }
  }
}

TEST_CASE("Logprobs ride on the commit events and change no token", "[engine][integration]") {
  for (const std::string fixture : {"llada_mha", "dream_gqa"}) {
    auto engine = MakeEngine(fixture);
    for (const DecodingParams& mode : Modes()) {
      INFO(fixture << " schedule " << Name(mode.schedule) << " t " << mode.temperature);
      GenerationRequest r = ShortRequest(mode);
      r.cache = testing::EntropyCache(0.5f, 4);
      const FinalEvent plain = RunOne(*engine, r);
      CHECK(plain.logprobs.empty());
      r.logprobs = 3;
      auto sink = std::make_shared<CollectSink>();
      REQUIRE(engine->Submit(r, sink).ok());
      const FinalEvent with = sink->Wait();
      REQUIRE(with.status.ok());
      CHECK(with.token_ids == plain.token_ids);
      CHECK(with.stats.rows_computed == plain.stats.rows_computed);
      REQUIRE(with.logprobs.size() == with.token_ids.size());
      std::vector<TokenLogprob> streamed;
      std::map<int32_t, float> committed;  // answer position -> logprob of its commit
      for (const CommitEvent& e : sink->commits()) {
        REQUIRE(e.logprobs.size() == e.tokens.size());
        for (size_t i = 0; i < e.tokens.size(); ++i) {
          CHECK(e.logprobs[i].token == e.tokens[i]);
          CHECK(e.logprobs[i].logprob <= 0.0f);
          REQUIRE(e.logprobs[i].top.size() == 3);
          // The listed tokens are the most probable: the committed one is among them or
          // below the last.
          CHECK(e.logprobs[i].top[0].logprob >= e.logprobs[i].top[1].logprob);
          CHECK(e.logprobs[i].top[1].logprob >= e.logprobs[i].top[2].logprob);
          CHECK(e.logprobs[i].logprob <= e.logprobs[i].top[0].logprob);
          committed[e.positions[i]] = e.logprobs[i].logprob;
        }
        streamed.insert(streamed.end(), e.text_logprobs.begin(), e.text_logprobs.end());
      }
      REQUIRE(streamed.size() >= with.logprobs.size());
      for (size_t i = 0; i < with.logprobs.size(); ++i) {
        CHECK(streamed[i].token == with.logprobs[i].token);
        CHECK(streamed[i].logprob == with.logprobs[i].logprob);
        CHECK(committed.at(static_cast<int32_t>(i)) == with.logprobs[i].logprob);
      }
    }
  }
  auto engine = MakeEngine("llada_mha");
  GenerationRequest r = ShortRequest(Modes()[0]);
  for (int bad : {-1, kMaxTopLogprobs + 1}) {
    r.logprobs = bad;
    const auto refused = engine->Submit(r, std::make_shared<CollectSink>());
    CHECK(absl::IsInvalidArgument(refused.status()));
    CHECK(refused.status().message().find("logprobs: ") == 0);
  }
}

TEST_CASE("Infilling: the suffix is read, never changed, and every cache keeps it",
          "[engine][integration]") {
  for (const std::string fixture : {"llada_mha", "dream_gqa"}) {
    auto engine = MakeEngine(fixture);
    for (const DecodingParams& mode : Modes()) {
      INFO(fixture << " schedule " << Name(mode.schedule) << " t " << mode.temperature);
      GenerationRequest r = ShortRequest(mode);
      r.suffix_ids = {64, 19, 201, 7, 64};
      const FinalEvent none = RunOne(*engine, r);
      CHECK(none.token_ids.size() <= 16);
      // A cache that refreshes every step is the exact decode, suffix included.
      r.cache = testing::EntropyCache(-std::numeric_limits<float>::infinity());
      const FinalEvent always = RunOne(*engine, r);
      CHECK(always.token_ids == none.token_ids);
      CHECK(always.stats.partial_steps == 0);
      // Partial steps never recompute the suffix: each computes fewer rows than the canvas.
      r.cache = testing::EntropyCache(std::numeric_limits<float>::infinity(), 2);
      const FinalEvent never = RunOne(*engine, r);
      CHECK(never.stats.partial_steps > 0);
      CHECK(never.stats.rows_computed < always.stats.rows_computed);
    }
  }
  auto engine = MakeEngine("llada_mha");
  GenerationRequest r = ShortRequest(Modes()[0]);
  r.suffix_ids = {5, engine->model_info().mask_token_id};
  auto refused = engine->Submit(r, std::make_shared<CollectSink>());
  CHECK(absl::IsInvalidArgument(refused.status()));
  CHECK(refused.status().message().find("suffix: token 1 is the mask token") == 0);
  r.suffix_ids = {5, 100000};
  refused = engine->Submit(r, std::make_shared<CollectSink>());
  CHECK(refused.status().message().find("suffix_ids[1] = 100000 is outside the vocabulary") == 0);
  r.suffix_ids.assign(100000, 5);
  refused = engine->Submit(r, std::make_shared<CollectSink>());
  CHECK(refused.status().message().find("suffix tokens (100000)") != std::string::npos);

  // Seeded canvases the engine refuses, naming the problem.
  r.suffix_ids.clear();
  const int32_t mask = engine->model_info().mask_token_id;
  auto refusal = [&](std::vector<int32_t> canvas, int max_new_tokens) {
    r.canvas = std::move(canvas);
    r.max_new_tokens = max_new_tokens;
    r.decoding.block_length = 4;
    return std::string(engine->Submit(r, std::make_shared<CollectSink>()).status().message());
  };
  CHECK(refusal(std::vector<int32_t>(8, 5), 8).find("canvas: no position to generate") == 0);
  CHECK(refusal({mask, mask, mask, mask}, 8).find("canvas: 4 tokens, but max_new_tokens is 8") ==
        0);
  CHECK(refusal({mask, -3, mask, mask}, 4).find("canvas[1] = -3 is outside the vocabulary") == 0);
  // An end token fixed before every mask ends the answer before anything is generated.
  const int32_t end = engine->model_info().end_token_ids.front();
  CHECK(refusal({5, end, mask, mask}, 4)
            .find("canvas: token 1 is an end token (id " + std::to_string(end) +
                  ") before the first mask (token 2)") == 0);
  // Fixed after a mask, it bounds the answer: decoding ends there at the latest.
  r.canvas = {mask, mask, end, mask};
  r.max_new_tokens = 4;
  const FinalEvent bounded = RunOne(*engine, r);
  CHECK(bounded.status.ok());
  CHECK(bounded.reason == FinishReason::kEos);
  CHECK(bounded.token_ids.size() <= 2);
  // A canvas of masks only is the plain request.
  r.canvas.clear();
  r.max_new_tokens = 16;
  const FinalEvent plain = RunOne(*engine, r);
  r.canvas.assign(16, mask);
  CHECK(RunOne(*engine, r).token_ids == plain.token_ids);
}

TEST_CASE("Chat messages are rendered and tokenized", "[engine][integration]") {
  auto engine = MakeEngine("llada_mha");
  GenerationRequest r;
  r.messages = {ChatMessage{"user", "Hi, who?"}};
  r.max_new_tokens = 4;
  r.decoding.block_length = 4;
  auto ids = engine->TokenizeInput(r);
  REQUIRE(ids.ok());
  CHECK(ids->front() == 280);  // <|startoftext|>
  const FinalEvent f = RunOne(*engine, r);
  CHECK(f.stats.prompt_tokens == static_cast<int>(ids->size()));
}

// The checks the forward pass used to repeat (forward_plan.cc, now debug assertions): a
// request with them never gets a sequence.
TEST_CASE("Submit refuses bad sampling parameters, naming the field", "[engine][integration]") {
  auto engine = MakeEngine("llada_mha");
  GenerationRequest ok;
  ok.prompt_ids = {5, 6, 7};
  ok.max_new_tokens = 4;
  ok.decoding.block_length = 4;
  struct Case {
    void (*edit)(GenerationRequest&);
    const char* message;
  };
  const Case cases[] = {
      {[](GenerationRequest& r) { r.decoding.temperature = -1.0f; },
       "decoding.temperature: -1 is outside [0, 100]"},
      {[](GenerationRequest& r) { r.decoding.temperature = NAN; },
       "decoding.temperature: nan is outside [0, 100]"},
      {[](GenerationRequest& r) { r.decoding.top_p = 0.0f; },
       "decoding.top_p: 0 is outside (0, 1]"},
      {[](GenerationRequest& r) { r.decoding.top_p = 1.5f; },
       "decoding.top_p: 1.5 is outside (0, 1]"},
      {[](GenerationRequest& r) { r.decoding.top_k = -2; },
       "decoding.top_k: -2 is outside [0, 1073741824]"},
      {[](GenerationRequest& r) { r.max_new_tokens = 0; },
       "max_new_tokens: 0 is outside [1, 1024]"},
  };
  for (const Case& c : cases) {
    GenerationRequest r = ok;
    c.edit(r);
    auto sink = std::make_shared<CollectSink>();
    const auto id = engine->Submit(r, sink);
    INFO(c.message);
    REQUIRE_FALSE(id.ok());
    CHECK(absl::IsInvalidArgument(id.status()));
    CHECK(id.status().message() == c.message);
  }
  RunOne(*engine, ok);  // and the engine still serves
}

TEST_CASE("Engine::Create reports a missing model folder", "[engine][integration]") {
  EngineOptions options;
  options.model_dir = "/nonexistent/model";
  auto engine = Engine::Create(options);
  CHECK_FALSE(engine.ok());
  options.model_dir = "";
  CHECK(absl::IsInvalidArgument(Engine::Create(options).status()));
  options.model_dir = FixtureDir("llada_mha");
  options.queue_capacity = 0;
  CHECK(absl::IsInvalidArgument(Engine::Create(options).status()));
  options.queue_capacity = 4;
  options.max_batch_sequences = 0;
  CHECK(absl::IsInvalidArgument(Engine::Create(options).status()));
}

}  // namespace
}  // namespace dllm
