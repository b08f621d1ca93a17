#include "engine/scheduler/shadow/shadow_budget.h"

#include <algorithm>
#include <cmath>

namespace dllm {

void ShadowBudget::Record(double step_seconds, double shadow_seconds) {
  // Unbounded: never in debt (and no inf x 0 = NaN from a zero-length step).
  if (std::isinf(fraction_)) return;
  credit_seconds_ = std::min(longest_shadow_seconds_, credit_seconds_ + fraction_ * step_seconds) -
                    shadow_seconds;
  longest_shadow_seconds_ = std::max(longest_shadow_seconds_, shadow_seconds);
}

}  // namespace dllm
