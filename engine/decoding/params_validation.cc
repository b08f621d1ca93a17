#include "engine/decoding/params_validation.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/core/shortest_decimal.h"

namespace dllm {
namespace {

absl::Status Invalid(const std::string& message) { return absl::InvalidArgumentError(message); }

}  // namespace

absl::Status ValidateDecodingParams(const DecodingParams& p, int gen_length) {
  if (p.steps < 0 || p.steps > kMaxDecodingSteps) {
    return Invalid(absl::StrFormat("decoding.steps (%d) must be in [0, %d] (0 = max_new_tokens)",
                                   p.steps, kMaxDecodingSteps));
  }
  const int steps = p.steps > 0 ? p.steps : gen_length;
  const bool threshold_mode = p.confidence_threshold > 0;
  if (!(p.confidence_threshold >= 0.0f && p.confidence_threshold <= 1.0f)) {
    return Invalid(absl::StrCat("decoding.confidence_threshold (",
                                ShortestDecimal(p.confidence_threshold), ") must be in [0, 1]"));
  }
  if (!(p.temperature >= 0.0f) || !std::isfinite(p.temperature)) {
    return Invalid(absl::StrCat("decoding.temperature (", ShortestDecimal(p.temperature),
                                ") must be finite and >= 0"));
  }
  if (p.top_k < 0) return Invalid(absl::StrFormat("decoding.top_k (%d) must be >= 0", p.top_k));
  if (!(p.top_p > 0.0f && p.top_p <= 1.0f)) {
    return Invalid(
        absl::StrCat("decoding.top_p (", ShortestDecimal(p.top_p), ") must be in (0, 1]"));
  }
  switch (p.schedule) {
    case Schedule::kBlock: {
      if (p.remasking == Remasking::kOrigin) {
        return Invalid("decoding.remasking origin requires decoding.schedule timestep");
      }
      if (p.block_length < 1 || p.block_length > gen_length) {
        return Invalid(absl::StrFormat("decoding.block_length (%d) must be in [1, %d]",
                                       p.block_length, gen_length));
      }
      if (gen_length % p.block_length != 0) {
        return Invalid(absl::StrFormat("decoding.block_length (%d) must divide max_new_tokens (%d)",
                                       p.block_length, gen_length));
      }
      const int blocks = gen_length / p.block_length;
      if (!threshold_mode && steps % blocks != 0) {
        return Invalid(absl::StrFormat(
            "decoding.steps (%d) must be a multiple of the number of blocks (%d = %d / %d)", steps,
            blocks, gen_length, p.block_length));
      }
      break;
    }
    case Schedule::kTimestep:
      if (!(p.eps > 0.0f && p.eps < 1.0f)) {
        return Invalid(
            absl::StrCat("decoding.eps (", ShortestDecimal(p.eps), ") must be in (0, 1)"));
      }
      if (!(p.alg_temp >= 0.0f) || !std::isfinite(p.alg_temp)) {
        return Invalid(absl::StrCat("decoding.alg_temp (", ShortestDecimal(p.alg_temp),
                                    ") must be finite and >= 0"));
      }
      if (threshold_mode) {
        return Invalid(
            "decoding.confidence_threshold applies to the block and window schedules "
            "only; set it to 0 for the timestep schedule");
      }
      break;
    case Schedule::kWindow:
      if (p.remasking == Remasking::kOrigin) {
        return Invalid("decoding.remasking origin requires decoding.schedule timestep");
      }
      if (p.window < 1) {
        return Invalid(absl::StrFormat("decoding.window (%d) must be >= 1", p.window));
      }
      break;
  }
  return absl::OkStatus();
}

absl::Status ValidateCacheParams(const CacheParams& c, const DecodingParams& decoding) {
  if (std::isnan(c.entropy_threshold)) {
    return Invalid("cache.entropy_threshold must not be NaN (use +-inf for never/always full)");
  }
  if (c.recent_k < 0 || c.recent_k > (1 << 20)) {
    return Invalid(absl::StrFormat("cache.recent_k (%d) must be in [0, %d]", c.recent_k, 1 << 20));
  }
  if (c.policy == CachePolicyKind::kInterval && c.refresh_interval < 1) {
    return Invalid(absl::StrFormat("cache.refresh_interval (%d) must be >= 1", c.refresh_interval));
  }
  if (c.policy == CachePolicyKind::kD2Cache) {
    if (c.d2_current_k < 1 || c.d2_current_k > (1 << 20)) {
      return Invalid(
          absl::StrFormat("cache.d2_current_k (%d) must be in [1, %d]", c.d2_current_k, 1 << 20));
    }
    if (!(c.d2_rollout_p >= 0.0f && c.d2_rollout_p <= 1.0f)) {
      return Invalid(absl::StrCat("cache.d2_rollout_p (", ShortestDecimal(c.d2_rollout_p),
                                  ") must be in [0, 1]"));
    }
    if (!(c.d2_sigma > 0.0f && std::isfinite(c.d2_sigma))) {
      return Invalid(absl::StrCat("cache.d2_sigma (", ShortestDecimal(c.d2_sigma),
                                  ") must be positive and finite"));
    }
  }
  if (c.policy == CachePolicyKind::kElastic &&
      !(c.elastic_gamma >= -1.0f && c.elastic_gamma <= 1.0f)) {
    return Invalid(absl::StrCat("cache.elastic_gamma (", ShortestDecimal(c.elastic_gamma),
                                ") must be in [-1, 1] (a cosine similarity)"));
  }
  if (c.shadow_sample_rate.has_value() &&
      !(*c.shadow_sample_rate >= 0.0f && *c.shadow_sample_rate <= 1.0f)) {
    return Invalid(absl::StrCat("cache.shadow_sample_rate (",
                                ShortestDecimal(*c.shadow_sample_rate), ") must be in [0, 1]"));
  }
  if ((c.policy == CachePolicyKind::kDual || c.policy == CachePolicyKind::kPrefix) &&
      decoding.schedule != Schedule::kBlock) {
    return Invalid(absl::StrCat("cache.policy ", Name(c.policy),
                                " requires decoding.schedule block (it refreshes at block "
                                "starts)"));
  }
  return absl::OkStatus();
}

}  // namespace dllm
