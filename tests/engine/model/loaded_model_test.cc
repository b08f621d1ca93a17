#include "engine/model/loaded_model.h"

#include <catch2/catch.hpp>
#include <string>

namespace dllm {
namespace {

std::string FixtureDir(const std::string& name) {
  return std::string(DLLM_TEST_DATA_DIR) + "/reference/" + name;
}

TEST_CASE("loaded_model: loads a fixture and runs a step") {
  for (const char* name : {"llada_mha", "dream_gqa"}) {
    LoadOptions options;
    options.model_dir = FixtureDir(name);
    options.cpu_threads = 1;
    options.kv_budget_bytes = 1 << 20;
    auto model = LoadModel(options);
    REQUIRE(model.ok());
    const LoadedModel& m = **model;
    INFO(name);
    REQUIRE(m.tokenizer != nullptr);
    REQUIRE(m.backend != nullptr);
    REQUIRE(m.transformer != nullptr);
    REQUIRE(m.kv_pool != nullptr);
    CHECK(m.kv_pool->budget_bytes() == (1 << 20));
    // End of turn and BOS come from the tokenizer's special tokens.
    const bool llada = m.config.family == ModelFamily::kLlada;
    const auto eot = m.tokenizer->TokenToId(llada ? "<|eot_id|>" : "<|im_end|>");
    REQUIRE(eot.has_value());
    CHECK(m.config.eot_token_id == *eot);
    CHECK(m.config.bos_token_id >= 0);

    const std::vector<int32_t> ids = m.tokenizer->Encode("hello world");
    REQUIRE(!ids.empty());
    auto slab = m.kv_pool->Allocate(static_cast<int>(ids.size()));
    REQUIRE(slab.ok());
    StepBatch batch;
    SequenceStep s;
    s.kv = slab->get();
    s.tokens = ids;
    for (int i = 0; i < static_cast<int>(ids.size()); ++i) s.query_positions.push_back(i);
    s.predict_positions = {static_cast<int32_t>(ids.size()) - 1};
    batch.sequences.push_back(s);
    StepResult result;
    REQUIRE(m.transformer->Forward(batch, &result).ok());
    REQUIRE(result.size() == 1);
    REQUIRE(result[0].size() == 1);
    CHECK(result[0][0].argmax_token >= 0);
    CHECK(result[0][0].argmax_token < m.config.vocab_size);
  }
}

TEST_CASE("loaded_model: errors name the problem") {
  LoadOptions options;
  options.model_dir = FixtureDir("no_such_model");
  auto missing = LoadModel(options);
  REQUIRE_FALSE(missing.ok());
  CHECK(std::string(missing.status().message()).find("no_such_model") != std::string::npos);

  options.model_dir = FixtureDir("llada_mha");
  options.backend = "tpu";
  auto bad_backend = LoadModel(options);
  CHECK(bad_backend.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(std::string(bad_backend.status().message()).find("tpu") != std::string::npos);

  options.backend = "cpu";
  options.kv_budget_bytes = 0;
  CHECK(LoadModel(options).status().code() == absl::StatusCode::kInvalidArgument);

  options.kv_budget_bytes = 1 << 20;
  options.model_dir = "";
  CHECK(LoadModel(options).status().code() == absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace dllm
