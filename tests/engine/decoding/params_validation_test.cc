#include "engine/decoding/params_validation.h"

#include <catch2/catch.hpp>

namespace dllm {
namespace {

void ExpectInvalid(const absl::Status& s, const std::string& fragment) {
  INFO(s.ToString());
  CHECK(absl::IsInvalidArgument(s));
  CHECK(std::string(s.message()).find(fragment) != std::string::npos);
}

TEST_CASE("Decoding parameters are validated with named fields", "[decoding][validation]") {
  DecodingParams ok;
  ok.block_length = 32;
  CHECK(ValidateDecodingParams(ok, 64).ok());

  DecodingParams p = ok;
  p.block_length = 24;
  ExpectInvalid(ValidateDecodingParams(p, 64), "decoding.block_length (24) must divide");
  p = ok;
  p.block_length = 0;
  ExpectInvalid(ValidateDecodingParams(p, 64), "decoding.block_length");
  p = ok;
  p.steps = 3;  // 2 blocks
  ExpectInvalid(ValidateDecodingParams(p, 64), "decoding.steps (3) must be a multiple");
  p.confidence_threshold = 0.9f;  // threshold mode does not use steps
  CHECK(ValidateDecodingParams(p, 64).ok());
  p = ok;
  p.steps = -1;
  ExpectInvalid(ValidateDecodingParams(p, 64), "decoding.steps");
  p = ok;
  p.confidence_threshold = 1.5f;
  ExpectInvalid(ValidateDecodingParams(p, 64), "decoding.confidence_threshold");
  p = ok;
  p.schedule = Schedule::kWindow;
  p.window = 0;
  ExpectInvalid(ValidateDecodingParams(p, 64), "decoding.window (0) must be >= 1");
  p = ok;
  p.schedule = Schedule::kTimestep;
  p.eps = 0;
  ExpectInvalid(ValidateDecodingParams(p, 64), "decoding.eps");
  p = ok;
  p.temperature = -1;
  ExpectInvalid(ValidateDecodingParams(p, 64), "decoding.temperature");
  p = ok;
  p.top_p = 0;
  ExpectInvalid(ValidateDecodingParams(p, 64), "decoding.top_p");
  p = ok;
  p.remasking = Remasking::kOrigin;
  ExpectInvalid(ValidateDecodingParams(p, 64), "origin");
}

TEST_CASE("Cache parameters are validated with named fields", "[decoding][validation]") {
  DecodingParams block;
  DecodingParams window;
  window.schedule = Schedule::kWindow;
  CacheParams c;
  c.policy = CachePolicyKind::kEntropy;
  CHECK(ValidateCacheParams(c, window).ok());
  c.recent_k = -1;
  ExpectInvalid(ValidateCacheParams(c, window), "cache.recent_k");
  c = CacheParams{};
  c.policy = CachePolicyKind::kInterval;
  c.refresh_interval = 0;
  ExpectInvalid(ValidateCacheParams(c, window), "cache.refresh_interval");
  c = CacheParams{};
  c.policy = CachePolicyKind::kDual;
  CHECK(ValidateCacheParams(c, block).ok());
  ExpectInvalid(ValidateCacheParams(c, window), "cache.policy dual");
  c = CacheParams{};
  c.entropy_threshold = std::numeric_limits<float>::quiet_NaN();
  ExpectInvalid(ValidateCacheParams(c, block), "cache.entropy_threshold");
}

}  // namespace
}  // namespace dllm
