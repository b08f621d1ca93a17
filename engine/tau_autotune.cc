// ValidateTauAutotuneOptions (engine.h). Its own file: the server's config parser, and so its
// fuzzers, validate cache.autotune with it without linking the engine.
#include <cmath>

#include "absl/strings/str_cat.h"
#include "engine/engine.h"

namespace dllm {

absl::Status ValidateTauAutotuneOptions(const TauAutotuneOptions& o, float shadow_sample_rate) {
  if (!(o.mismatch_budget > 0 && o.mismatch_budget < 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("mismatch_budget: must be in (0, 1), got ", o.mismatch_budget));
  }
  if (o.window_samples < 1 || o.window_samples > 1000000) {
    return absl::InvalidArgumentError(
        absl::StrCat("window_samples: must be in [1, 1000000], got ", o.window_samples));
  }
  if (!(o.step_factor > 1 && o.step_factor <= 10)) {
    return absl::InvalidArgumentError(
        absl::StrCat("step_factor: must be in (1, 10], got ", o.step_factor));
  }
  if (!(o.min_scale > 0 && o.min_scale <= 1 && o.max_scale >= 1 && std::isfinite(o.max_scale))) {
    return absl::InvalidArgumentError(
        absl::StrCat("min_scale, max_scale: must satisfy 0 < min <= 1 <= max < inf, got [",
                     o.min_scale, ", ", o.max_scale, "]"));
  }
  if (o.enabled && !(shadow_sample_rate > 0)) {
    return absl::InvalidArgumentError(
        "enabled: tau autotuning learns from shadow samples; it needs shadow_sample_rate > 0");
  }
  return absl::OkStatus();
}

}  // namespace dllm
