// engine.h free functions, per-family defaults, and the trained tiny models: C++ greedy
// generations against the PyTorch trainer's recorded generations
// (tools/train/out/<name>_test_generations.jsonl).
#include "engine/engine.h"

#include <catch2/catch.hpp>
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
  const DecodingParams llada = DefaultDecodingParams(ModelFamily::kLlada);
  CHECK(llada.schedule == Schedule::kBlock);
  CHECK(llada.remasking == Remasking::kLowConfidence);
  const DecodingParams dream = DefaultDecodingParams(ModelFamily::kDream);
  CHECK(dream.schedule == Schedule::kTimestep);
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
  CHECK(info.default_decoding.schedule == Schedule::kTimestep);
}

struct TrainedCase {
  std::vector<int32_t> prompt_ids;
  int gen_length = 0;
  std::vector<int32_t> output_ids;
};

// Runs every recorded test prompt through the engine with the trainer's sampler settings and
// returns the fraction whose answer (cut at the first end token) matches token for token.
double TrainedAgreement(const std::string& name, const DecodingParams& decoding_template,
                        bool block_is_whole_answer, int* cases_out) {
  const std::string root = DLLM_SOURCE_DIR;
  const std::string model_dir = root + "/models/" + name;
  const std::string generations = root + "/tools/train/out/" + name + "_test_generations.jsonl";
  std::vector<TrainedCase> cases;
  std::ifstream in(generations);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    const nlohmann::json j = nlohmann::json::parse(line);
    cases.push_back({j["prompt_ids"].get<std::vector<int32_t>>(), j["gen_length"].get<int>(),
                     j["output_ids"].get<std::vector<int32_t>>()});
  }
  REQUIRE(!cases.empty());
  EngineOptions options;
  options.model_dir = model_dir;
  options.max_batch_sequences = 16;
  options.queue_capacity = static_cast<int>(cases.size());
  options.kv_budget_bytes = int64_t{1} << 30;
  auto engine = Engine::Create(options);
  INFO(engine.status().ToString());
  REQUIRE(engine.ok());
  const ModelInfo& info = (*engine)->model_info();
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
  const std::string root = DLLM_SOURCE_DIR;
  return std::filesystem::exists(root + "/models/" + name + "/config.json") &&
         std::filesystem::exists(root + "/tools/train/out/" + name + "_test_generations.jsonl");
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
  const double agreement = TrainedAgreement("llada-tiny", d, true, &n);
  INFO("agreement " << agreement << " over " << n << " prompts");
  CHECK(agreement >= 0.99);
}

TEST_CASE("dream-tiny: greedy generations equal the PyTorch trainer's", "[engine][trained]") {
  if (!TrainedModelPresent("dream-tiny")) {
    WARN("models/dream-tiny or its test generations are not present; skipped");
    return;
  }
  DecodingParams d;
  d.schedule = Schedule::kTimestep;
  d.remasking = Remasking::kMaskgitPlus;
  d.eps = 1e-3f;
  int n = 0;
  const double agreement = TrainedAgreement("dream-tiny", d, false, &n);
  INFO("agreement " << agreement << " over " << n << " prompts");
  CHECK(agreement >= 0.99);
}

}  // namespace
}  // namespace dllm
