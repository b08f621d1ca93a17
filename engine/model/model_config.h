// ModelConfig: the architecture facts of one checkpoint, read from its config.json.
//
// Both families (LLaDA `model_type: llada`, Dream `model_type: Dream`) map onto this one
// struct; the forward pass branches only on the few fields that differ (qkv bias, RoPE
// rounding, logit shift). Values are validated by ParseModelConfig: a config that returns
// OK has positive sizes, heads that divide the hidden size, and kv heads that divide heads.
#ifndef DLLM_ENGINE_MODEL_MODEL_CONFIG_H_
#define DLLM_ENGINE_MODEL_MODEL_CONFIG_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "engine/core/model_family.h"
#include "engine/kv/kv_layout.h"

namespace dllm {

struct ModelConfig {
  ModelFamily family = ModelFamily::kLlada;
  int hidden_size = 0;  // d_model
  int num_layers = 0;
  int num_heads = 0;
  int num_kv_heads = 0;       // == num_heads for MHA (LLaDA)
  int head_dim = 0;           // hidden_size / num_heads
  int intermediate_size = 0;  // FFN width
  int vocab_size = 0;         // rows of the embedding and LM head
  int max_positions = 0;
  float rope_theta = 0;
  float norm_eps = 0;
  bool qkv_bias = false;      // Dream: q/k/v projections carry a bias
  bool shift_logits = false;  // Dream: token i is predicted from hidden row i-1
  // LLaDA rotates in fp32 and rounds once; Dream rounds cos/sin and each op to bf16.
  bool rope_in_bf16 = false;
  // LM head shares the embedding matrix (LLaDA `weight_tying`, Dream `tie_word_embeddings`);
  // false for both released checkpoints. MapModelWeights then points lm_head at the embedding.
  bool tie_word_embeddings = false;

  int32_t mask_token_id = -1;
  int32_t eos_token_id = -1;
  int32_t pad_token_id = -1;
  int32_t bos_token_id = -1;
  int32_t eot_token_id = -1;  // end of turn: <|eot_id|> / <|im_end|>; -1 if unknown

  // What the KV pool needs of this config.
  KvLayout kv_layout() const { return {num_layers, num_kv_heads, head_dim, hidden_size}; }
  // Bytes of K plus V for one position across all layers, in the given element size.
  int64_t KvBytesPerPosition(int bytes_per_element) const {
    return kv_layout().BytesPerPosition(bytes_per_element);
  }
};

// Parses config.json text. `source` names the file in error messages.
absl::StatusOr<ModelConfig> ParseModelConfig(std::string_view json_text, std::string_view source);

// Reads and parses <model_dir>/config.json.
absl::StatusOr<ModelConfig> LoadModelConfig(const std::string& model_dir);

}  // namespace dllm

#endif  // DLLM_ENGINE_MODEL_MODEL_CONFIG_H_
