// The functions of engine/shadow_sampling.h. Its own file, with no include but that header:
// the server's config parser, and so its fuzzers, validate cache.autotune with it without
// linking the engine.
#include "engine/shadow_sampling.h"

#include <cmath>

#include "absl/strings/str_cat.h"

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

absl::Status ValidateShadowOptions(const ShadowOptions& o) {
  if (!(o.sample_rate >= 0.0f && o.sample_rate <= 1.0f)) {
    return absl::InvalidArgumentError(
        absl::StrCat("sample_rate: must be in [0, 1], got ", o.sample_rate));
  }
  if (!(o.max_time_fraction > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_time_fraction: must be > 0, got ", o.max_time_fraction));
  }
  if (absl::Status s = ValidateTauAutotuneOptions(o.tau_autotune, o.sample_rate); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("tau_autotune.", s.message()));
  }
  return absl::OkStatus();
}

const char* ShadowRegionName(int region) {
  switch (region) {
    case kShadowPrompt:
      return "prompt";
    case kShadowDecodedOld:
      return "decoded_old";
    case kShadowMasksOutside:
      return "masks_outside";
    case kShadowRecomputed:
      return "recomputed";
    default:
      return "unknown";
  }
}

const char* ShadowLayerGroupName(int group) {
  switch (group) {
    case kShadowFirst:
      return "first";
    case kShadowMiddle:
      return "middle";
    case kShadowLast:
      return "last";
    default:
      return "unknown";
  }
}

}  // namespace dllm
