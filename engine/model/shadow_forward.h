// Shadow-step support: what the scheduler needs to check a partial step against a full one
// (cache-quality observability, engine/shadow_sampling.h; run by engine/scheduler/shadow/).
//
// ForwardCapturingLogits runs a batch exactly like Transformer::Forward (same kernels, same
// slab writes, bitwise the same RowStats) and additionally downloads the fp32 logits rows of
// one sequence. CompareKvSlabs reads two slabs of the same geometry and returns, per layer and
// position, the squared L2 norms of (a - b) and of b for K and V, so the caller can aggregate
// relative drift over any set of positions and layers.
//
// Both copy data to the host through Backend::DownloadFloats (any backend); they are meant for
// sampled steps, not every step. Only for transformers made by Transformer::Create
// (UNIMPLEMENTED otherwise).
#ifndef DLLM_ENGINE_MODEL_SHADOW_FORWARD_H_
#define DLLM_ENGINE_MODEL_SHADOW_FORWARD_H_

#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/model/step_batch.h"
#include "engine/model/transformer.h"

namespace dllm {

// `logits` gets one fp32 row (vocab_size values) per predict position of sequence `capture`
// (after the model's logit shift, as Forward predicts).
absl::Status ForwardCapturingLogits(Transformer& transformer, const StepBatch& batch, int capture,
                                    StepResult* result, std::vector<std::vector<float>>* logits);

// Index (layer * positions + position).
struct KvSquaredDiffs {
  int layers = 0;
  int positions = 0;
  std::vector<double> k_diff, k_ref, v_diff, v_ref;  // sum over the row of (a-b)^2, b^2
};

// Positions [0, positions) of every layer; both slabs must hold at least that many.
absl::StatusOr<KvSquaredDiffs> CompareKvSlabs(Transformer& transformer, KvSlab& a, KvSlab& b,
                                              int positions);

}  // namespace dllm

#endif  // DLLM_ENGINE_MODEL_SHADOW_FORWARD_H_
