// Test/debug access to the logits rows of a forward pass.
//
// The production Forward never copies logits off the backend. Tests that compare against an
// independent reference, or check that a partial step reproduces a full one, need the rows
// themselves; ForwardWithLogits runs the same plan and additionally downloads them.
#ifndef DLLM_ENGINE_MODEL_FORWARD_DEBUG_H_
#define DLLM_ENGINE_MODEL_FORWARD_DEBUG_H_

#include <vector>

#include "absl/status/status.h"
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
// (vocab_size values) that produced the RowStats. Only for transformers made by
// Transformer::Create (UNIMPLEMENTED otherwise).
absl::Status ForwardWithLogits(Transformer& transformer, const StepBatch& batch,
                               DebugLogitsRows mode, StepResult* result,
                               std::vector<std::vector<std::vector<float>>>* logits);

}  // namespace dllm

#endif  // DLLM_ENGINE_MODEL_FORWARD_DEBUG_H_
