#include "bench/step_cost_executor.h"

#include <algorithm>
#include <utility>

namespace dllm::bench {

StepCost CostOfPass(const StepBatch& batch, int num_layers) {
  StepCost cost;
  for (const SequenceStep& s : batch.sequences) {
    const int layers = std::max(1, num_layers);
    const double share =
        static_cast<double>(layers - std::clamp(s.first_layer, 0, layers)) / layers;
    const double rows = share * static_cast<double>(s.query_positions.size());
    const double key_rows = rows * static_cast<double>(s.tokens.size());
    cost.rows += rows;
    cost.key_rows += key_rows;
    if (s.attention_maps != nullptr) cost.map_key_rows += key_rows;
    cost.predicted_rows += static_cast<double>(s.predict_positions.size());
    cost.sequences += 1;
  }
  return cost;
}

void StepCostExecutor::Charge(const StepBatch& batch) {
  const StepCost pass = CostOfPass(batch, num_layers_);
  step_ += pass;
  if (on_run_) on_run_(step_, pass);
}

absl::Status StepCostExecutor::Run(const StepBatch& batch, std::span<KvHandle* const> kv,
                                   StepResult* result) {
  absl::Status s = inner_->Run(batch, kv, result);
  if (s.ok()) Charge(batch);
  return s;
}

absl::Status StepCostExecutor::RunCapturingLogits(const StepBatch& batch,
                                                  std::span<KvHandle* const> kv, int capture,
                                                  StepResult* result,
                                                  std::vector<std::vector<float>>* logits) {
  absl::Status s = inner_->RunCapturingLogits(batch, kv, capture, result, logits);
  if (s.ok()) Charge(batch);
  return s;
}

StepCost StepCostExecutor::EndStep() { return std::exchange(step_, StepCost{}); }

}  // namespace dllm::bench
