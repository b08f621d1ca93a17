#include "engine/model/loaded_model.h"

#include <catch2/catch.hpp>
#include <filesystem>
#include <string>

#include "engine/backend/backend_factory.h"
#include "engine/model/checkpoint.h"
#include "engine/model/model_weights.h"
#include "engine/model/transformer.h"
#include "tests/engine/model/safetensors_fixture.h"

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

TEST_CASE("loaded_model: a checkpoint truncated during load is an error naming the file") {
  // LoadModel's steps one by one, with model.safetensors cut in half after
  // the checkpoint was opened and validated and before the weights are copied to the backend
  // (the window in which an operator's `cp` over the file hits a loading server). The mmap
  // reader killed the process with SIGBUS in Transformer::Create; now Create fails cleanly.
  const std::filesystem::path dir = testing::MakeTempDir("loaded_model_truncated");
  std::filesystem::copy(FixtureDir("llada_mha"), dir, std::filesystem::copy_options::recursive);
  auto config = LoadModelConfig(dir.string());
  REQUIRE(config.ok());
  auto checkpoint = Checkpoint::Open(dir.string());
  REQUIRE(checkpoint.ok());
  auto weights = MapModelWeights(**checkpoint, *config);
  REQUIRE(weights.ok());
  const std::filesystem::path file = dir / "model.safetensors";
  std::filesystem::resize_file(file, std::filesystem::file_size(file) / 2);

  auto backend = CreateBackend("cpu", 1);
  REQUIRE(backend.ok());
  auto transformer = Transformer::Create(*config, *weights, backend->get());
  REQUIRE(absl::IsDataLoss(transformer.status()));
  const std::string message(transformer.status().message());
  INFO(message);
  CHECK(message.find(file.string()) != std::string::npos);
  CHECK(message.find("tensor '") != std::string::npos);
  CHECK(message.find("bytes when opened") != std::string::npos);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace dllm
