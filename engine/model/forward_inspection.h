// Inspection access to a forward pass: its logits rows and the drift between two KV slabs.
//
// The production Forward never copies logits off the backend. Shadow steps (cache-quality
// observability, engine/shadow_sampling.h; run by engine/scheduler/shadow/) and the tests
// that compare against an independent reference need the rows themselves: ForwardWithLogits
// runs a batch exactly like Transformer::Forward (same kernels, same slab writes, bitwise the
// same RowStats) and additionally downloads them. CompareKvSlabs reads two slabs of the same
// geometry and returns, per layer and position, the squared L2 norms of (a - b) and of b for
// K and V, so the caller can aggregate relative drift over any set of positions and layers.
//
// Both copy data to the host through Backend::DownloadFloats (any backend); they are meant for
// sampled steps and tests, not every step. Only for transformers made by Transformer::Create
// (UNIMPLEMENTED otherwise).
#ifndef DLLM_ENGINE_MODEL_FORWARD_INSPECTION_H_
#define DLLM_ENGINE_MODEL_FORWARD_INSPECTION_H_

#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/model/step_batch.h"
#include "engine/model/transformer.h"

namespace dllm {

enum class DebugLogitsRows {
  // predict_positions are predicted positions (Dream: the row of position p-1 is used).
  kPredicted,
  // predict_positions name hidden rows directly (no Dream shift): the model's raw output at
  // those positions, as in the reference's unshifted logits.
  kHiddenRows,
};

// Like Forward; `logits` gets, per sequence and per predict position, the fp32 logits row
// (vocab_size values) that produced the RowStats: of every sequence, or of sequence `capture`
// only when capture >= 0 (the other sequences' entries stay empty; INVALID_ARGUMENT when it is
// outside the batch).
absl::Status ForwardWithLogits(Transformer& transformer, const StepBatch& batch,
                               DebugLogitsRows mode, StepResult* result,
                               std::vector<std::vector<std::vector<float>>>* logits,
                               int capture = -1);

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

#endif  // DLLM_ENGINE_MODEL_FORWARD_INSPECTION_H_
