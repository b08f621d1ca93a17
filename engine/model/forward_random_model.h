// Random model weights with real shapes, built in memory (no files): for tests and benches
// of the forward pass.
//
// Values are uniform with a per-tensor scale chosen so that activations stay O(1) through
// the layers and the logits are spread (entropies well away from 0 and ln V): embedding
// std 1, linear weights std 1/sqrt(fan_in), norm weights 1 ± 0.1, biases std 0.1.
#ifndef DLLM_ENGINE_MODEL_FORWARD_RANDOM_MODEL_H_
#define DLLM_ENGINE_MODEL_FORWARD_RANDOM_MODEL_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "engine/model/model_config.h"
#include "engine/model/model_weights.h"

namespace dllm {

struct RandomModel {
  ModelConfig config;
  std::deque<std::vector<float>> storage;       // owns fp32 data the views point into
  std::deque<std::vector<uint16_t>> storage16;  // owns bf16 data the views point into
  ModelWeights weights;
};

// `config` must have positive sizes; qkv_bias decides whether biases are made. `dtype` is
// kF32 or kBF16 (values rounded to nearest even, as a bf16 checkpoint stores them).
std::unique_ptr<RandomModel> MakeRandomModel(const ModelConfig& config, uint64_t seed,
                                             DType dtype = DType::kF32);

// A complete ModelConfig for the given shape (family-specific flags and ids filled in the
// way the released checkpoints set them: Dream has qkv bias and the logit shift).
ModelConfig RandomModelConfig(ModelFamily family, int hidden, int layers, int heads, int kv_heads,
                              int intermediate, int vocab, int max_positions);

}  // namespace dllm

#endif  // DLLM_ENGINE_MODEL_FORWARD_RANDOM_MODEL_H_
