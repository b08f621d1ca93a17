// StepFlops: the arithmetic of one forward step, the figure the benchmarks turn into FLOP/s.
// 2 FLOPs per weight element per computed row and layer (Q, K, V, O projections and the
// three MLP matrices), attention 4 x kv_positions x heads x head_dim per row and layer
// (scores and P.V), and the LM head over the predicted rows. Norms, RoPE and softmax are
// left out: under 1% at every shipped shape.
#ifndef DLLM_ENGINE_MODEL_STEP_FLOPS_H_
#define DLLM_ENGINE_MODEL_STEP_FLOPS_H_

#include "engine/model/model_config.h"

namespace dllm {

// Matmul weight elements of one transformer layer.
double LayerMatmulParams(const ModelConfig& c);

// FLOPs of a step computing `rows` query rows against `kv_positions` keys and predicting
// `predicted` rows.
double StepFlops(const ModelConfig& c, double rows, double kv_positions, double predicted);

}  // namespace dllm

#endif  // DLLM_ENGINE_MODEL_STEP_FLOPS_H_
