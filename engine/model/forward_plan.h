// ForwardPlan: the validated row layout of one StepBatch.
//
// For every sequence it fixes which hidden rows are computed (the requested query positions
// plus, for each predicted position, the row that predicts it: p for LLaDA, p-1 for Dream
// with p = 0 reusing row 0, added when the caller did not ask for it), where those rows sit in
// the batch matrices (sequences are concatenated in batch order, rows ascending), and which
// batch row feeds the LM head for each predicted position.
#ifndef DLLM_ENGINE_MODEL_FORWARD_PLAN_H_
#define DLLM_ENGINE_MODEL_FORWARD_PLAN_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/model/model_config.h"
#include "engine/model/step_batch.h"

namespace dllm {

struct SequencePlan {
  int row_begin = 0;                  // first batch row of this sequence
  std::vector<int32_t> positions;     // computed positions, ascending (batch rows in order)
  std::vector<int32_t> predict_rows;  // batch row per predict position (same order)
};

struct ForwardPlan {
  std::vector<SequencePlan> sequences;
  int total_rows = 0;
  int total_predictions = 0;
};

// Validates `batch` (INVALID_ARGUMENT naming the sequence and the problem) and lays it out.
// `shift_logits` false: predict_positions are used as hidden rows directly (debug mode or
// LLaDA).
absl::StatusOr<ForwardPlan> PlanForward(const StepBatch& batch, const ModelConfig& config,
                                        bool shift_logits);

}  // namespace dllm

#endif  // DLLM_ENGINE_MODEL_FORWARD_PLAN_H_
