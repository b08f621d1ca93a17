// ModelWeights: the checkpoint's tensors arranged by role, with names and shapes checked
// against the ModelConfig. Family-specific tensor names (LLaDA's model.transformer.*, Dream's
// Qwen2 model.layers.*) are resolved here and nowhere else.
#ifndef DLLM_ENGINE_MODEL_MODEL_WEIGHTS_H_
#define DLLM_ENGINE_MODEL_MODEL_WEIGHTS_H_

#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/model/checkpoint.h"
#include "engine/model/model_config.h"

namespace dllm {

struct LayerWeights {
  TensorView attn_norm;  // [hidden]
  TensorView q, k, v;    // [heads*head_dim, hidden], [kv_heads*head_dim, hidden] x2
  std::optional<TensorView> q_bias, k_bias, v_bias;  // present iff config.qkv_bias
  TensorView o;                                      // [hidden, heads*head_dim]
  TensorView ffn_norm;                               // [hidden]
  TensorView gate, up;  // [intermediate, hidden]; gate goes through SiLU
  TensorView down;      // [hidden, intermediate]
};

struct ModelWeights {
  TensorView embed;  // [vocab, hidden]
  std::vector<LayerWeights> layers;
  TensorView final_norm;  // [hidden]
  TensorView lm_head;     // [vocab, hidden]
};

// Resolves and checks every expected tensor. Errors name the tensor, the expected shape and
// the shape found. Views borrow from `checkpoint`, which must outlive the result.
absl::StatusOr<ModelWeights> MapModelWeights(const Checkpoint& checkpoint,
                                             const ModelConfig& config);

}  // namespace dllm

#endif  // DLLM_ENGINE_MODEL_MODEL_WEIGHTS_H_
