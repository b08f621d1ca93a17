// ValidateParams / ValidateParamFields: every field's one domain, the rules between fields,
// and the messages ("<field>: <reason>", naming a configured limit where one applies).
#include <catch2/catch.hpp>
#include <limits>
#include <string>

#include "engine/core/params.h"

namespace dllm {
namespace {

std::string ErrorOf(const absl::Status& s) {
  INFO(s.ToString());
  CHECK(absl::IsInvalidArgument(s));
  return std::string(s.message());
}

absl::Status Check(const DecodingParams& d, const CacheParams& c = {}, int gen = 64,
                   const ParamLimits& limits = {}) {
  return ValidateParams(gen, d, c, limits);
}

TEST_CASE("Decoding parameters are validated with named fields", "[core][validation]") {
  DecodingParams ok;
  ok.block_length = 32;
  CHECK(Check(ok).ok());

  DecodingParams p = ok;
  p.block_length = 24;
  CHECK(ErrorOf(Check(p)) == "decoding.block_length: 24 must divide max_new_tokens (64)");
  p.block_length = 128;
  CHECK(ErrorOf(Check(p)) == "decoding.block_length: 128 exceeds max_new_tokens (64)");
  p.block_length = 0;
  CHECK(ErrorOf(Check(p)) == "decoding.block_length: 0 is outside [1, 1048576]");
  p = ok;
  p.steps = 3;  // 2 blocks
  CHECK(ErrorOf(Check(p)) ==
        "decoding.steps: 3 must be a multiple of the number of blocks (2 = 64 / 32)");
  p.confidence_threshold = 0.9f;  // threshold mode does not use steps
  CHECK(Check(p).ok());
  p = ok;
  p.steps = -1;
  CHECK(ErrorOf(Check(p)) == "decoding.steps: -1 is outside [0, 65536]");
  p = ok;
  p.confidence_threshold = 1.5f;
  CHECK(ErrorOf(Check(p)) == "decoding.confidence_threshold: 1.5 is outside [0, 1]");
  p = ok;
  p.schedule = Schedule::kWindow;
  p.window = 0;
  CHECK(ErrorOf(Check(p)) == "decoding.window: 0 is outside [1, 1048576]");
  p = ok;
  p.schedule = Schedule::kTimestep;
  p.eps = 0;
  CHECK(ErrorOf(Check(p)) == "decoding.eps: 0 is outside (0, 1)");
  p.eps = 1e-3f;
  p.confidence_threshold = 0.9f;
  CHECK_THAT(ErrorOf(Check(p)),
             Catch::StartsWith("decoding.confidence_threshold: applies to the block and window"));
  p = ok;
  p.temperature = -1;
  CHECK(ErrorOf(Check(p)) == "decoding.temperature: -1 is outside [0, 100]");
  p.temperature = std::numeric_limits<float>::infinity();
  CHECK_THAT(ErrorOf(Check(p)), Catch::StartsWith("decoding.temperature: inf is outside"));
  p = ok;
  p.top_p = 0;
  CHECK(ErrorOf(Check(p)) == "decoding.top_p: 0 is outside (0, 1]");
  p.top_p = std::numeric_limits<float>::quiet_NaN();
  CHECK_THAT(ErrorOf(Check(p)), Catch::StartsWith("decoding.top_p: "));
  p = ok;
  p.top_k = -1;
  CHECK(ErrorOf(Check(p)) == "decoding.top_k: -1 is outside [0, 1073741824]");
  p = ok;
  p.alg_temp = -0.5f;
  CHECK(ErrorOf(Check(p)) == "decoding.alg_temp: -0.5 is outside [0, 100]");
  p = ok;
  p.remasking = Remasking::kOrigin;
  CHECK(ErrorOf(Check(p)) == "decoding.remasking: origin requires decoding.schedule timestep");
  p.schedule = Schedule::kTimestep;
  CHECK(Check(p).ok());
}

TEST_CASE("max_new_tokens is bounded by the limits", "[core][validation]") {
  CHECK(ErrorOf(Check({}, {}, 0)) == "max_new_tokens: 0 is outside [1, 1048576]");
  ParamLimits limits;
  limits.max_new_tokens = 128;
  limits.section = "limits";
  DecodingParams d;
  d.block_length = 32;
  CHECK(ErrorOf(Check(d, {}, 256, limits)) ==
        "max_new_tokens: 256 exceeds limits.max_new_tokens (128)");
  CHECK(Check(d, {}, 128, limits).ok());
}

TEST_CASE("A configured limit is named in the message", "[core][validation]") {
  ParamLimits limits;
  limits.section = "limits";
  limits.max_steps = 1024;
  limits.max_temperature = 2;
  limits.max_shadow_sample_rate = 0.1f;
  limits.vocab_size = 1000;
  limits.allowed_cache_policies = {CachePolicyKind::kNone, CachePolicyKind::kEntropy};
  DecodingParams d;
  d.steps = 5000;
  CHECK(ErrorOf(ValidateParamFields(d, {}, limits)) ==
        "decoding.steps: 5000 exceeds limits.max_steps (1024)");
  d = {};
  d.temperature = 9;
  CHECK(ErrorOf(ValidateParamFields(d, {}, limits)) ==
        "decoding.temperature: 9 exceeds limits.max_temperature (2)");
  d = {};
  d.top_k = 1001;
  CHECK(ErrorOf(ValidateParamFields(d, {}, limits)) ==
        "decoding.top_k: 1001 exceeds the vocabulary size (1000)");
  d.top_k = 1000;
  CHECK(ValidateParamFields(d, {}, limits).ok());
  CacheParams c;
  c.policy = CachePolicyKind::kDual;
  CHECK(ErrorOf(ValidateParamFields({}, c, limits)) ==
        "cache.policy: 'dual' is not in limits.allowed_cache_policies");
  c = {};
  c.shadow_sample_rate = 0.5f;
  CHECK(ErrorOf(ValidateParamFields({}, c, limits)) ==
        "cache.shadow_sample_rate: 0.5 exceeds limits.max_shadow_sample_rate (0.1)");
  c.shadow_sample_rate = -0.5f;
  CHECK(ErrorOf(ValidateParamFields({}, c, limits)) ==
        "cache.shadow_sample_rate: -0.5 is outside [0, 0.1]");
  // Without a section the same excess reads as a range (the engine's own guards).
  d = {};
  d.steps = 70000;
  CHECK(ErrorOf(ValidateParamFields(d, {}, ParamLimits{})) ==
        "decoding.steps: 70000 is outside [0, 65536]");
}

TEST_CASE("Cache parameters are validated with named fields", "[core][validation]") {
  DecodingParams block;
  DecodingParams window;
  window.schedule = Schedule::kWindow;
  CacheParams c;
  c.policy = CachePolicyKind::kEntropy;
  CHECK(Check(window, c).ok());
  c.recent_k = -1;
  CHECK(ErrorOf(Check(window, c)) == "cache.recent_k: -1 is outside [0, 1048576]");
  c = CacheParams{};
  c.policy = CachePolicyKind::kInterval;
  c.refresh_interval = 0;
  CHECK(ErrorOf(Check(window, c)) == "cache.refresh_interval: 0 is outside [1, 65536]");
  for (CachePolicyKind policy : {CachePolicyKind::kDual, CachePolicyKind::kPrefix}) {
    c = CacheParams{};
    c.policy = policy;
    CHECK(Check(block, c).ok());
    CHECK(ErrorOf(Check(window, c)) ==
          std::string("cache.policy: ") + Name(policy) +
              " requires decoding.schedule block (it refreshes at block starts)");
  }
  c = CacheParams{};
  c.d2_current_k = 0;
  CHECK(ErrorOf(Check(block, c)) == "cache.d2_current_k: 0 is outside [1, 1048576]");
  c = CacheParams{};
  c.d2_rollout_p = 1.5f;
  CHECK(ErrorOf(Check(block, c)) == "cache.d2_rollout_p: 1.5 is outside [0, 1]");
  c = CacheParams{};
  c.d2_sigma = std::numeric_limits<float>::infinity();
  CHECK(ErrorOf(Check(block, c)) == "cache.d2_sigma: inf must be positive and finite");
  c = CacheParams{};
  c.elastic_gamma = -1.5f;
  CHECK(ErrorOf(Check(block, c)) == "cache.elastic_gamma: -1.5 is outside [-1, 1]");
}

TEST_CASE("tau: any value but NaN (negative = every step full, +inf = never)",
          "[core][validation]") {
  CacheParams c;
  c.policy = CachePolicyKind::kEntropy;
  for (float tau : {-std::numeric_limits<float>::infinity(), -1.0f, 0.0f, 0.5f,
                    std::numeric_limits<float>::infinity()}) {
    c.entropy_threshold = tau;
    INFO(tau);
    CHECK(Check({}, c).ok());
  }
  c.entropy_threshold = std::numeric_limits<float>::quiet_NaN();
  CHECK_THAT(ErrorOf(Check({}, c)), Catch::StartsWith("cache.entropy_threshold: must not be NaN"));
}

TEST_CASE("ValidateParamFields checks domains only; ValidateParams adds the rules between fields",
          "[core][validation]") {
  DecodingParams d;
  d.block_length = 48;  // does not divide 64: only a request (with its length) can tell
  CHECK(ValidateParamFields(d, {}, {}).ok());
  CHECK_THAT(ErrorOf(Check(d)), Catch::StartsWith("decoding.block_length: 48 must divide"));
}

}  // namespace
}  // namespace dllm
