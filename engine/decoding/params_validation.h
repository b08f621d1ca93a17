// Validation of per-request decoding and cache parameters. Errors are INVALID_ARGUMENT and
// name the field and its bound, e.g. "decoding.block_length (5) must divide max_new_tokens
// (64)".
#ifndef DLLM_ENGINE_DECODING_PARAMS_VALIDATION_H_
#define DLLM_ENGINE_DECODING_PARAMS_VALIDATION_H_

#include "absl/status/status.h"
#include "engine/core/params.h"

namespace dllm {

// Largest accepted step budget (a guard against absurd requests, not a model limit).
inline constexpr int kMaxDecodingSteps = 1 << 16;

absl::Status ValidateDecodingParams(const DecodingParams& params, int gen_length);
absl::Status ValidateCacheParams(const CacheParams& params, const DecodingParams& decoding);

}  // namespace dllm

#endif  // DLLM_ENGINE_DECODING_PARAMS_VALIDATION_H_
