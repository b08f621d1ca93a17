// The JSON form of one engine StepEvent, sent as an SSE event to HTTP clients that ask for
// it (`"stream_options": {"include_steps": true}`; the playground at GET / does):
//
//   {"object": "dllm.step", "id": "<response id>", "step": 3, "kind": "full" | "partial",
//    "rows": 41, "max_entropy": 0.12, "tau": 0.5 | "inf" | null, "window": [0, 32],
//    "committed": [[position, "text", is_special], ...],
//    "provisional": [[position, "text", is_special], ...]}      (only when not dropped)
//
// "tau" is null unless the request's cache policy is "entropy". Positions are answer-relative.
// "text" is the token's bytes as UTF-8 (invalid sequences, e.g. half of a multi-byte character,
// become U+FFFD when serialized); special tokens are shown by their literal form ("<|eot_id|>")
// with is_special 1.
//
// Thread-safety: pure functions.
#ifndef DLLM_SERVER_HTTP_HTTP_STEP_JSON_H_
#define DLLM_SERVER_HTTP_HTTP_STEP_JSON_H_

#include <nlohmann/json.hpp>
#include <string>

#include "engine/engine.h"

namespace dllm {

// `with_provisional` false leaves the "provisional" key out: the caller drops the proposals
// of steps a newer step has superseded before they were sent (they are provisional; the
// committed tokens never are dropped).
nlohmann::json StepEventJson(const StepEvent& event, const Tokenizer& tokenizer,
                             const std::string& response_id, bool with_provisional);

}  // namespace dllm

#endif  // DLLM_SERVER_HTTP_HTTP_STEP_JSON_H_
