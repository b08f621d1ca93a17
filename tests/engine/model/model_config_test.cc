#include "engine/model/model_config.h"

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "nlohmann/json.hpp"

namespace dllm {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

Json ReadJson(const std::string& name) {
  std::ifstream in(fs::path(DLLM_TEST_DATA_DIR) / "config" / name);
  REQUIRE(in.good());
  return Json::parse(in);
}

Json Llada() { return ReadJson("llada_8b_instruct.json"); }
Json Dream() { return ReadJson("dream_v0_instruct_7b.json"); }

absl::StatusOr<ModelConfig> Parse(const Json& j) { return ParseModelConfig(j.dump(), "cfg.json"); }

// The parse fails and the message mentions every one of `parts`.
void CheckError(const Json& j, std::initializer_list<std::string> parts) {
  auto c = Parse(j);
  REQUIRE(!c.ok());
  const std::string message(c.status().message());
  INFO(message);
  CHECK(absl::IsInvalidArgument(c.status()));
  for (const std::string& part : parts) CHECK(message.find(part) != std::string::npos);
}

TEST_CASE("ModelConfig: LLaDA-8B-Instruct config.json", "[model_config]") {
  auto c = Parse(Llada());
  REQUIRE(c.ok());
  CHECK(c->family == ModelFamily::kLlada);
  CHECK(ModelFamilyName(c->family) == "LLaDA");
  CHECK(c->hidden_size == 4096);
  CHECK(c->num_layers == 32);
  CHECK(c->num_heads == 32);
  CHECK(c->num_kv_heads == 32);
  CHECK(c->head_dim == 128);
  CHECK(c->intermediate_size == 12288);
  CHECK(c->vocab_size == 126464);
  CHECK(c->max_positions == 4096);
  CHECK(c->rope_theta == 500000.0f);
  CHECK(c->norm_eps == 1e-5f);
  CHECK_FALSE(c->qkv_bias);
  CHECK_FALSE(c->shift_logits);
  CHECK_FALSE(c->rope_in_bf16);
  CHECK_FALSE(c->tie_word_embeddings);
  CHECK(c->mask_token_id == 126336);
  CHECK(c->eos_token_id == 126081);
  CHECK(c->pad_token_id == 126081);
  CHECK(c->bos_token_id == -1);  // only in generation_config.json; filled by the loader
  CHECK(c->eot_token_id == -1);
  // 2 (K,V) * 32 layers * 32 kv heads * 128 dims * 2 bytes.
  CHECK(c->KvBytesPerPosition(2) == 524288);
}

TEST_CASE("ModelConfig: Dream-v0-Instruct-7B config.json", "[model_config]") {
  auto c = Parse(Dream());
  REQUIRE(c.ok());
  CHECK(c->family == ModelFamily::kDream);
  CHECK(ModelFamilyName(c->family) == "Dream");
  CHECK(c->hidden_size == 3584);
  CHECK(c->num_layers == 28);
  CHECK(c->num_heads == 28);
  CHECK(c->num_kv_heads == 4);
  CHECK(c->head_dim == 128);
  CHECK(c->intermediate_size == 18944);
  CHECK(c->vocab_size == 152064);
  CHECK(c->max_positions == 131072);
  CHECK(c->rope_theta == 1000000.0f);
  CHECK(c->norm_eps == 1e-6f);
  CHECK(c->qkv_bias);
  CHECK(c->shift_logits);
  CHECK(c->rope_in_bf16);
  CHECK(c->mask_token_id == 151666);
  CHECK(c->eos_token_id == 151643);
  CHECK(c->pad_token_id == 151643);
  CHECK(c->bos_token_id == 151643);
  CHECK(c->eot_token_id == -1);
  CHECK(c->KvBytesPerPosition(2) == 2 * 28 * 4 * 128 * 2);
}

TEST_CASE("ModelConfig: LLaDA defaults", "[model_config]") {
  Json j = Llada();
  j.erase("mask_token_id");
  j.erase("embedding_size");
  j["vocab_size"] = 126400;
  j["n_kv_heads"] = nullptr;  // OLMo: null means multi-head attention
  auto c = Parse(j);
  REQUIRE(c.ok());
  CHECK(c->mask_token_id == 126336);
  CHECK(c->vocab_size == 126400);
  CHECK(c->num_kv_heads == 32);

  // embedding_size (padded rows) wins over vocab_size when present.
  j = Llada();
  j["vocab_size"] = 126349;
  c = Parse(j);
  REQUIRE(c.ok());
  CHECK(c->vocab_size == 126464);
}

TEST_CASE("ModelConfig: model_type errors list the supported types", "[model_config]") {
  Json j = Llada();
  j["model_type"] = "llama";
  CheckError(j, {"cfg.json", "llama", "llada", "Dream"});
  j.erase("model_type");
  CheckError(j, {"cfg.json", "model_type", "llada", "Dream"});
}

TEST_CASE("ModelConfig: missing and invalid fields are named", "[model_config]") {
  for (const char* field : {"d_model", "n_layers", "n_heads", "mlp_hidden_size",
                            "max_sequence_length", "rope_theta", "rms_norm_eps"}) {
    Json j = Llada();
    j.erase(field);
    CheckError(j, {"cfg.json", field, "missing"});
  }
  for (const char* field :
       {"hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size",
        "vocab_size", "max_position_embeddings", "mask_token_id"}) {
    Json j = Dream();
    j.erase(field);
    CheckError(j, {"cfg.json", field, "missing"});
  }
  struct Bad {
    const char* field;
    Json value;
  };
  const Bad bad[] = {{"d_model", 0},       {"d_model", -4096},      {"d_model", "4096"},
                     {"d_model", 4096.5},  {"n_layers", 1ll << 40}, {"rope_theta", -1.0},
                     {"rope_theta", "x"},  {"rms_norm_eps", 0},     {"include_qkv_bias", 1},
                     {"eos_token_id", -2}, {"mask_token_id", "m"},  {"rms_norm_eps", 1e-50},
                     {"rope_theta", 1e39}};
  for (const Bad& b : bad) {
    Json j = Llada();
    j[b.field] = b.value;
    CheckError(j, {"cfg.json", b.field});
  }
}

TEST_CASE("ModelConfig: inconsistent sizes are rejected", "[model_config]") {
  Json j = Llada();
  j["n_heads"] = 30;  // 4096 % 30 != 0
  CheckError(j, {"4096", "30"});
  j = Dream();
  j["num_key_value_heads"] = 5;  // 28 % 5 != 0
  CheckError(j, {"5", "28"});
  j = Dream();
  j["num_key_value_heads"] = 56;
  CheckError(j, {"56"});
  j = Dream();
  j["mask_token_id"] = 152064;  // == vocab size
  CheckError(j, {"mask_token_id", "152064"});
  j = Llada();
  j["embedding_size"] = 1000;  // smaller than vocab_size
  CheckError(j, {"embedding_size"});
}

TEST_CASE("ModelConfig: unsupported architecture switches are rejected", "[model_config]") {
  const std::pair<const char*, Json> llada[] = {
      {"include_bias", true},         {"alibi", true},
      {"attention_layer_norm", true}, {"rope", false},
      {"block_type", "sequential"},   {"activation_type", "gelu"},
      {"layer_norm_type", "default"}};
  for (const auto& [field, value] : llada) {
    Json j = Llada();
    j[field] = value;
    CheckError(j, {field});
  }
  const std::pair<const char*, Json> dream[] = {
      {"rope_scaling", Json{{"type", "yarn"}, {"factor", 4.0}}},
      {"use_sliding_window", true},
      {"hidden_act", "gelu"}};
  for (const auto& [field, value] : dream) {
    Json j = Dream();
    j[field] = value;
    CheckError(j, {field});
  }
}

TEST_CASE("ModelConfig: malformed JSON", "[model_config]") {
  for (const char* text : {"", "{", "[1, 2]", "{\"model_type\": \"llada\",}", "null"}) {
    auto c = ParseModelConfig(text, "broken.json");
    REQUIRE(!c.ok());
    CHECK(std::string(c.status().message()).find("broken.json") != std::string::npos);
  }
}

TEST_CASE("ModelConfig: LoadModelConfig reads <dir>/config.json", "[model_config]") {
  auto c = LoadModelConfig((fs::path(DLLM_TEST_DATA_DIR) / "reference" / "dream_gqa").string());
  REQUIRE(c.ok());
  CHECK(c->family == ModelFamily::kDream);
  CHECK(c->hidden_size == 64);
  CHECK(c->num_kv_heads == 2);
  auto missing = LoadModelConfig("/nonexistent/model");
  REQUIRE(!missing.ok());
  CHECK(absl::IsNotFound(missing.status()));
  CHECK(std::string(missing.status().message()).find("/nonexistent/model/config.json") !=
        std::string::npos);
}

}  // namespace
}  // namespace dllm
