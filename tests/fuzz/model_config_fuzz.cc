// libFuzzer target: config.json text -> ParseModelConfig. An accepted config must describe
// a model the engine can size safely.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "engine/model/model_config.h"

namespace {
void Require(bool condition) {
  if (!condition) std::abort();
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto config = dllm::ParseModelConfig(text, "fuzz/config.json");
  if (!config.ok()) {
    Require(!config.status().message().empty());
    return 0;
  }
  const dllm::ModelConfig& c = *config;
  Require(c.num_layers > 0 && c.hidden_size > 0 && c.num_heads > 0 && c.num_kv_heads > 0);
  Require(c.intermediate_size > 0 && c.vocab_size > 0 && c.max_positions > 0);
  Require(c.head_dim * c.num_heads == c.hidden_size);
  Require(c.num_heads % c.num_kv_heads == 0);
  Require(c.mask_token_id < c.vocab_size && c.eos_token_id < c.vocab_size);
  Require(c.mask_token_id < 0 || c.mask_token_id != c.eos_token_id);
  Require(c.rope_theta > 0 && c.norm_eps > 0);
  return 0;
}
