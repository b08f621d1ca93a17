// engine.h free functions, per-family defaults, and the trained tiny models: C++ greedy
// generations against the PyTorch trainer's recorded generations
// (tools/train/out/<name>_test_generations.jsonl).
#include "engine/engine.h"

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "engine/engine_impl.h"
#include "tests/engine/scheduler/collect_sink.h"

namespace dllm {
namespace {

TEST_CASE("FinishReasonName", "[engine]") {
  CHECK(std::string(FinishReasonName(FinishReason::kLength)) == "length");
  CHECK(std::string(FinishReasonName(FinishReason::kEos)) == "eos");
  CHECK(std::string(FinishReasonName(FinishReason::kCancelled)) == "cancelled");
  CHECK(std::string(FinishReasonName(FinishReason::kDeadline)) == "deadline");
  CHECK(std::string(FinishReasonName(FinishReason::kError)) == "error");
}

TEST_CASE("Per-family decoding defaults", "[engine]") {
  // EntropyCache's tuned point (window 16, threshold 0.9; tests/e2e checks it against the
  // tuning results) with each family's own ranking.
  const DecodingParams llada = DefaultDecodingParams(ModelFamily::kLlada);
  CHECK(llada.schedule == Schedule::kWindow);
  CHECK(llada.window == 16);
  CHECK(llada.confidence_threshold == 0.9f);
  CHECK(llada.remasking == Remasking::kLowConfidence);
  const DecodingParams dream = DefaultDecodingParams(ModelFamily::kDream);
  CHECK(dream.schedule == Schedule::kWindow);
  CHECK(dream.remasking == Remasking::kEntropy);
  CHECK(dream.eps == 1e-3f);
  ModelConfig c;
  c.family = ModelFamily::kDream;
  c.eos_token_id = 5;
  c.eot_token_id = 7;
  c.mask_token_id = 9;
  const ModelInfo info = MakeModelInfo(c, "dir");
  CHECK(info.family == "dream");
  CHECK(info.end_token_ids == std::vector<int32_t>{5, 7});
  CHECK(info.default_decoding.schedule == Schedule::kWindow);
}

// Overridable (DLLM_TRAINED_MODELS_DIR, DLLM_TRAINED_GENERATIONS_DIR) to check a snapshot.
std::string EnvOr(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != 0 ? std::string(v) : fallback;
}
std::string ModelsDir() {
  return EnvOr("DLLM_TRAINED_MODELS_DIR", std::string(DLLM_SOURCE_DIR) + "/models");
}
std::string GenerationsDir() {
  return EnvOr("DLLM_TRAINED_GENERATIONS_DIR", std::string(DLLM_SOURCE_DIR) + "/tools/train/out");
}

struct TrainedCase {
  std::string prompt;
  std::vector<int32_t> prompt_ids;
  int gen_length = 0;
  std::vector<int32_t> output_ids;
};

// Runs every recorded test prompt through the engine with the trainer's sampler settings and
// returns the fraction whose answer (cut at the first end token) matches token for token.
// `prompt_agreement`: the fraction of prompts whose chat rendering + tokenization by the
// engine equals the trainer's prompt_ids (what dllm-bench relies on).
// `stride` > 1 checks every stride-th recorded prompt (keeps the test fast on 2 cores).
double TrainedAgreement(const std::string& name, const DecodingParams& decoding_template,
                        bool block_is_whole_answer, int stride, int* cases_out,
                        double* prompt_agreement, int cpu_threads = 1) {
  const std::string model_dir = ModelsDir() + "/" + name;
  const std::string generations = GenerationsDir() + "/" + name + "_test_generations.jsonl";
  std::vector<TrainedCase> cases;
  std::ifstream in(generations);
  std::string line;
  int line_index = 0;
  while (std::getline(in, line)) {
    if (line.empty() || line_index++ % stride != 0) continue;
    const nlohmann::json j = nlohmann::json::parse(line);
    cases.push_back({j["prompt"].get<std::string>(), j["prompt_ids"].get<std::vector<int32_t>>(),
                     j["gen_length"].get<int>(), j["output_ids"].get<std::vector<int32_t>>()});
  }
  REQUIRE(!cases.empty());
  EngineOptions options;
  options.model_dir = model_dir;
  options.max_batch_sequences = 16;
  options.queue_capacity = static_cast<int>(cases.size());
  options.kv_budget_bytes = int64_t{1} << 30;
  options.cpu_threads = cpu_threads;
  auto engine = Engine::Create(options);
  INFO(engine.status().ToString());
  REQUIRE(engine.ok());
  const ModelInfo& info = (*engine)->model_info();
  int same_prompt = 0;
  for (const TrainedCase& c : cases) {
    GenerationRequest chat;
    chat.messages = {ChatMessage{"user", c.prompt}};
    auto ids = (*engine)->TokenizeInput(chat);
    if (ids.ok() && *ids == c.prompt_ids) ++same_prompt;
  }
  *prompt_agreement = double(same_prompt) / cases.size();
  std::vector<std::shared_ptr<testing::CollectSink>> sinks;
  for (const TrainedCase& c : cases) {
    GenerationRequest r;
    r.prompt_ids = c.prompt_ids;
    r.max_new_tokens = c.gen_length;
    r.decoding = decoding_template;
    r.decoding.steps = c.gen_length;
    if (block_is_whole_answer) r.decoding.block_length = c.gen_length;
    sinks.push_back(std::make_shared<testing::CollectSink>());
    auto id = (*engine)->Submit(r, sinks.back());
    INFO(id.status().ToString());
    REQUIRE(id.ok());
  }
  int same = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const FinalEvent f = sinks[i]->Wait();
    REQUIRE(f.status.ok());
    std::vector<int32_t> want;
    for (int32_t id : cases[i].output_ids) {
      if (std::count(info.end_token_ids.begin(), info.end_token_ids.end(), id)) break;
      want.push_back(id);
    }
    if (f.token_ids == want)
      ++same;
    else
      UNSCOPED_INFO(name << " case " << i << " differs");
  }
  *cases_out = static_cast<int>(cases.size());
  return double(same) / cases.size();
}

bool TrainedModelPresent(const std::string& name) {
  return std::filesystem::exists(ModelsDir() + "/" + name + "/config.json") &&
         std::filesystem::exists(GenerationsDir() + "/" + name + "_test_generations.jsonl");
}

TEST_CASE("llada-tiny: greedy generations equal the PyTorch trainer's", "[engine][trained]") {
  if (!TrainedModelPresent("llada-tiny")) {
    WARN("models/llada-tiny or its test generations are not present; skipped");
    return;
  }
  DecodingParams d;  // vanilla: one token per step, low confidence over the whole answer
  d.schedule = Schedule::kBlock;
  d.remasking = Remasking::kLowConfidence;
  int n = 0;
  double prompts = 0;
  const double agreement = TrainedAgreement("llada-tiny", d, true, 1, &n, &prompts);
  INFO("agreement " << agreement << " over " << n << " prompts; prompt tokens " << prompts);
  CHECK(agreement >= 0.99);
  CHECK(prompts >= 0.99);
}

TEST_CASE("dream-tiny: greedy generations equal the PyTorch trainer's", "[engine][trained]") {
  if (!TrainedModelPresent("dream-tiny")) {
    WARN("models/dream-tiny or its test generations are not present; skipped");
    return;
  }
  // The trainer commits exactly one token per step (evaluate.py). Dream's own timestep
  // schedule with steps = G commits 0 tokens at step 0 and 2 at the last step
  // (schedule_expectations.json), so its last token comes from a forward that has not seen
  // the one before it. One token per step over the whole answer is the block schedule with
  // block_length = steps = G and maskgit_plus ranking: that must match token for token.
  DecodingParams one_per_step;
  one_per_step.schedule = Schedule::kBlock;
  one_per_step.remasking = Remasking::kMaskgitPlus;
  int n = 0;
  double prompts = 0;
  const double agreement = TrainedAgreement("dream-tiny", one_per_step, true, 1, &n, &prompts);
  INFO("agreement " << agreement << " over " << n << " prompts; prompt tokens " << prompts);
  CHECK(agreement >= 0.99);
  CHECK(prompts >= 0.99);

  DecodingParams timestep;
  timestep.schedule = Schedule::kTimestep;
  timestep.remasking = Remasking::kMaskgitPlus;
  timestep.eps = 1e-3f;
  const double timestep_agreement =
      TrainedAgreement("dream-tiny", timestep, false, 6, &n, &prompts);
  WARN(
      "dream-tiny Dream timestep schedule (maskgit_plus, steps = G) agrees with the trainer's "
      "one-per-step sampler on "
      << 100.0 * timestep_agreement << "% of " << n << " prompts");
  CHECK(timestep_agreement >= 0.5);  // identical except the final two-token step
}

// The long-form models: the trainer's vanilla sampler is blocks of 32 (the model's
// generation_config.json), one token per step; its recorded generations stop a batch once
// every answer is final, so output_ids may end in masks after the end token (never compared:
// answers are cut at the first end token, where the engine stops too).
void CheckLongModelAgreement(const std::string& name, Remasking remasking) {
  if (!TrainedModelPresent(name)) {
    WARN("models/" << name << " or its test generations are not present; skipped");
    return;
  }
  DecodingParams d;
  d.schedule = Schedule::kBlock;
  d.remasking = remasking;
  d.block_length = 32;
  // The whole check (>= 200 prompts, >= 99% identical) takes 23-40+ minutes per model on 2
  // cores, more than CI can give two of them: ctest runs every DLLM_PARITY_STRIDE-th prompt
  // (tests/CMakeLists.txt) and allows one mismatch in that sample; scripts/parity-long runs
  // all of them with the full bar.
  const char* stride_env = std::getenv("DLLM_PARITY_STRIDE");
  const int stride = stride_env != nullptr ? std::max(1, std::atoi(stride_env)) : 1;
  int n = 0;
  double prompts = 0;
  const double agreement = TrainedAgreement(name, d, false, stride, &n, &prompts, 2);
  INFO("agreement " << agreement << " over " << n << " prompts (every " << stride
                    << "th); prompt tokens " << prompts);
  CHECK(n >= 200 / stride);
  CHECK(agreement >= (stride == 1 ? 0.99 : 1.0 - 1.0 / n));
  CHECK(prompts >= 0.99);
}

TEST_CASE("llada-long: greedy generations equal the PyTorch trainer's",
          "[engine][trained][.long]") {
  CheckLongModelAgreement("llada-long", Remasking::kLowConfidence);
}

TEST_CASE("dream-long: greedy generations equal the PyTorch trainer's",
          "[engine][trained][.long]") {
  CheckLongModelAgreement("dream-long", Remasking::kMaskgitPlus);
}

// The suite-v7 models: the same sampler on the chain-of-thought split, whose
// wording varies from line to line, so a mismatch there compounds less predictably.
TEST_CASE("llada-cot: greedy generations equal the PyTorch trainer's", "[engine][trained][.long]") {
  CheckLongModelAgreement("llada-cot", Remasking::kLowConfidence);
}

TEST_CASE("dream-cot: greedy generations equal the PyTorch trainer's", "[engine][trained][.long]") {
  CheckLongModelAgreement("dream-cot", Remasking::kMaskgitPlus);
}

}  // namespace
}  // namespace dllm
