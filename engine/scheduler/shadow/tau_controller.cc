#include "engine/scheduler/shadow/tau_controller.h"

#include <algorithm>

namespace dllm {

bool TauController::Observe(bool token_mismatch) {
  if (!options_.enabled) return false;
  ++samples_;
  mismatches_ += token_mismatch ? 1 : 0;
  if (samples_ < options_.window_samples) return false;
  const double rate = static_cast<double>(mismatches_) / samples_;
  if (rate > options_.mismatch_budget) {
    scale_ /= options_.step_factor;
  } else if (rate < options_.mismatch_budget / 2) {
    scale_ *= options_.step_factor;
  }
  scale_ = std::clamp(scale_, options_.min_scale, options_.max_scale);
  samples_ = 0;
  mismatches_ = 0;
  return true;
}

}  // namespace dllm
