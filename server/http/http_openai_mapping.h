// Maps OpenAI-style JSON (POST /v1/chat/completions, /v1/completions) to the same
// v1::GenerateRequest that the gRPC API receives, and engine results back to OpenAI JSON.
// Validation of values (ranges, limits) stays in request_mapping.h: this file only checks
// JSON shapes and names, so both transports accept and reject the same requests.
//
// Request fields:
//   model                           required string (the server checks that it names its model)
//   messages (chat) | prompt        input; prompt may be a string, [string] or [token id, ...]
//   max_tokens | max_completion_tokens  -> max_new_tokens
//   suffix                          completions only: text after the gap (infilling)
//   canvas                          a seeded answer as token ids (the mask id: generate)
//   temperature, top_p, top_k, seed -> decoding.*
//   n                               choices (>= 1; the server's limits.max_choices bounds it)
//   stream, stream_options.include_usage  SSE; usage is always sent in the last chunk
//   stream_options.include_steps    SSE: one "dllm.step" event per denoising step
//                                   (http_step_json.h); needs "stream": true
//   stop                            a string or up to 4 strings (see http_stop_sequences.h)
//   user                            ignored
//   logprobs, top_logprobs          chat: logprobs true, top_logprobs 0..20 alternatives;
//                                   completions: logprobs N (0..20) -> GenerateRequest.logprobs
//   presence_penalty, frequency_penalty, logit_bias  accepted only when off
//   decoding, cache                 objects mirroring the proto's DecodingOptions/CacheOptions
//                                   (every field of both);
//                                   enums by config name ("block", "entropy") or proto name
//                                   ("SCHEDULE_BLOCK", "CACHE_POLICY_ENTROPY")
// Anything else is INVALID_ARGUMENT "<field>: unknown field".
//
// Thread-safety: pure functions.
#ifndef DLLM_SERVER_HTTP_HTTP_OPENAI_MAPPING_H_
#define DLLM_SERVER_HTTP_HTTP_OPENAI_MAPPING_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "dllm/v1/dllm.pb.h"

namespace dllm {

enum class OpenAiEndpoint { kChatCompletions, kCompletions };

struct OpenAiRequest {
  OpenAiEndpoint endpoint = OpenAiEndpoint::kChatCompletions;
  v1::GenerateRequest request;  // what the gRPC API would have received
  std::string model;
  bool stream = false;
  bool include_steps = false;     // stream_options.include_steps
  int n = 1;                      // choices: n engine requests, seeds seed, seed + 1, ...
  std::vector<std::string> stop;  // non-empty stop strings
  // Proto field path -> the JSON name the client used, for error messages
  // ("max_new_tokens" -> "max_tokens"; see RenameFieldInError).
  std::vector<std::pair<std::string, std::string>> field_names;
};

// Bounds on a request body's JSON, checked on the text before parsing: the deepest valid
// request (chat content parts) nests 5 levels, and the largest holds a token-id prompt.
inline constexpr int kMaxJsonDepth = 16;
inline constexpr int64_t kMaxJsonValues = 1 << 18;

// INVALID_ARGUMENT naming the field for malformed JSON, wrong types and unknown fields, and
// "body: ..." for JSON nested deeper than kMaxJsonDepth or holding more than kMaxJsonValues
// values (a DOM of either would cost many times the body's size in memory).
absl::StatusOr<OpenAiRequest> ParseOpenAiRequest(OpenAiEndpoint endpoint, std::string_view body);

// Rewrites a request_mapping error ("decoding.temperature: 9 exceeds ...") to the JSON
// field the client sent ("temperature: 9 exceeds ..."). Other statuses pass unchanged.
absl::Status RenameFieldInError(const absl::Status& status, const OpenAiRequest& request);

// "stop" (end token), "length" (canvas full), "step_limit", else null.
nlohmann::json OpenAiFinishReason(v1::FinishReason reason);

// The non-streaming response: chat.completion / text_completion with usage, plus the
// gRPC response's cache_stats and timings as extra fields.
nlohmann::json CompletionResponseJson(const OpenAiRequest& request, const std::string& id,
                                      int64_t created, const v1::GenerateResponse& response);
// One streamed chunk carrying a committed text delta (`first` adds the assistant role) and,
// when the request asked for logprobs, those of the tokens it carries (LogprobsJson).
nlohmann::json DeltaChunkJson(const OpenAiRequest& request, const std::string& id, int64_t created,
                              std::string_view delta, bool first,
                              nlohmann::json logprobs = nullptr);
// The last chunk: empty delta, finish_reason, usage, cache_stats, timings.
nlohmann::json FinalChunkJson(const OpenAiRequest& request, const std::string& id, int64_t created,
                              const v1::GenerateResponse& response);

// n > 1. One choice's outcome: its reply, or the status it failed with (response null).
struct ChoiceOutcome {
  absl::Status status;
  const v1::GenerateResponse* response = nullptr;
};
// The unary response of n > 1 choices, in index order: each choice with its own
// finish_reason, cache_stats and timings; a failed one with finish_reason null, no text and
// an "error" object (OpenAI's error shape). usage counts the prompt once and sums the
// completions. At least one choice must have a response.
nlohmann::json MultiChoiceResponseJson(const OpenAiRequest& request, const std::string& id,
                                       int64_t created, const std::vector<ChoiceOutcome>& choices);
// Streamed n > 1: a failed choice's chunk (finish_reason null, "error"), and the last chunk
// before [DONE]: no choices, the summed usage (OpenAI's stream_options.include_usage shape).
nlohmann::json ChoiceErrorChunkJson(const OpenAiRequest& request, const std::string& id,
                                    int64_t created, int index, const absl::Status& status);
nlohmann::json UsageChunkJson(const OpenAiRequest& request, const std::string& id, int64_t created,
                              const std::vector<ChoiceOutcome>& choices);

// OpenAI's logprobs object for the first `count` of `tokens`. Chat: {"content": [{token,
// logprob, bytes, top_logprobs: [{token, logprob, bytes}]}], "refusal": null}. Completions:
// {tokens, token_logprobs, top_logprobs: [{token: logprob}], text_offset}, the offsets in
// bytes from *text_offset on, which advances past the tokens. A token's string is its raw
// bytes, so one that splits a UTF-8 character shows U+FFFD; `bytes` is exact.
nlohmann::json LogprobsJson(const OpenAiRequest& request,
                            const google::protobuf::RepeatedPtrField<v1::TokenLogprob>& tokens,
                            int count, int64_t* text_offset);
// How many leading tokens' bytes reach `text_bytes` bytes: the tokens a (possibly cut) answer
// text is made of.
int TokensCoveringText(const google::protobuf::RepeatedPtrField<v1::TokenLogprob>& tokens,
                       size_t text_bytes);
// GET /v1/models.
nlohmann::json ModelListJson(const std::string& model, int64_t created);

// Serializes without throwing on invalid UTF-8 (replaced by U+FFFD).
std::string DumpJson(const nlohmann::json& value);

}  // namespace dllm

#endif  // DLLM_SERVER_HTTP_HTTP_OPENAI_MAPPING_H_
