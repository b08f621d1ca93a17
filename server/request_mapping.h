// Turns a validated DiffusionLM request into the engine's GenerationRequest.
//
// Order of precedence for each knob: the request's field when set, else the operator's
// configured default (config `decoding:` / `cache:`), else the model family's default
// (ModelInfo; config.h's ResolveRequestDefaults). The result is then checked by
// ValidateParams (engine/core/params.h) under the operator's limits; every failure is
// INVALID_ARGUMENT whose message starts with the request field's path and names the bound,
// e.g. "decoding.steps: 5000 exceeds limits.max_steps (1024)". This file only maps: it refuses
// what cannot be mapped (unknown enum values, a missing input) and bounds the prompt.
#ifndef DLLM_SERVER_REQUEST_MAPPING_H_
#define DLLM_SERVER_REQUEST_MAPPING_H_

#include "absl/status/statusor.h"
#include "dllm/v1/dllm.pb.h"
#include "engine/engine.h"
#include "server/config.h"

namespace dllm {

// Maps and validates everything except the prompt length after chat templating, which
// needs the tokenizer (see CheckPromptLength). The prompt's (or chat's) size in bytes is
// checked against limits.max_prompt_bytes (which must be resolved, i.e. > 0, or is ignored).
// `request_id` is the server-side id to use.
absl::StatusOr<GenerationRequest> ToGenerationRequest(const v1::GenerateRequest& request,
                                                      const RequestDefaults& defaults,
                                                      const LimitsSection& limits,
                                                      const ModelInfo& model);

// Builds a request for Tokenize (only the input is used; its size is bounded by
// limits.max_prompt_bytes like Generate's).
absl::StatusOr<GenerationRequest> ToTokenizeRequest(const v1::TokenizeRequest& request,
                                                    const LimitsSection& limits);

// limits.max_prompt_bytes when set (> 0); otherwise derived from the token limit:
// min(limits.max_prompt_tokens, model.max_positions) * kPromptBytesPerToken. A prompt must be
// bounded in bytes before it is tokenized, and a prompt that fits the token limit rarely
// needs more than a few bytes per token (BPE tokens of real text average ~4 bytes).
inline constexpr int64_t kPromptBytesPerToken = 32;
int64_t EffectiveMaxPromptBytes(const LimitsSection& limits, const ModelInfo& model);

// INVALID_ARGUMENT "input: prompt is N tokens, exceeds limits.max_prompt_tokens (M)".
absl::Status CheckPromptLength(size_t prompt_tokens, const LimitsSection& limits);

// Enum conversions (UNSPECIFIED has no engine value and returns nullopt).
std::optional<Schedule> FromProto(v1::Schedule schedule);
std::optional<Remasking> FromProto(v1::Remasking remasking);
std::optional<CachePolicyKind> FromProto(v1::CachePolicy policy);
v1::Schedule ToProto(Schedule schedule);
v1::Remasking ToProto(Remasking remasking);
v1::CachePolicy ToProto(CachePolicyKind policy);

}  // namespace dllm

#endif  // DLLM_SERVER_REQUEST_MAPPING_H_
