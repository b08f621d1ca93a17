#include "engine/scheduler/shadow/tau_controller.h"

#include <algorithm>
#include <cassert>
#include <cmath>

namespace dllm {

RateBounds WilsonBounds(int events, int samples, double z) {
  assert(samples > 0 && events >= 0 && events <= samples);
  const double n = samples;
  const double p = events / n;
  const double z2 = z * z;
  const double center = p + z2 / (2 * n);
  const double half = z * std::sqrt(p * (1 - p) / n + z2 / (4 * n * n));
  const double denominator = 1 + z2 / n;
  return {std::clamp((center - half) / denominator, 0.0, 1.0),
          std::clamp((center + half) / denominator, 0.0, 1.0)};
}

bool TauController::Observe(bool token_mismatch) {
  if (!options_.enabled) return false;
  ++samples_;
  mismatches_ += token_mismatch ? 1 : 0;
  if (samples_ < options_.window_samples) return false;
  const RateBounds rate = WilsonBounds(mismatches_, samples_, kZ);
  if (rate.lower > options_.mismatch_budget) {
    scale_ /= options_.step_factor;
  } else if (rate.upper < options_.mismatch_budget / 2) {
    scale_ *= options_.step_factor;
  } else if (samples_ < kMaxWindows * static_cast<long long>(options_.window_samples)) {
    return false;
  }
  scale_ = std::clamp(scale_, options_.min_scale, options_.max_scale);
  samples_ = 0;
  mismatches_ = 0;
  return true;
}

}  // namespace dllm
