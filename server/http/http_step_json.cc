#include "server/http/http_step_json.h"

#include <cmath>
#include <span>

#include "engine/tokenizer/tokenizer.h"

namespace dllm {
namespace {

using nlohmann::json;

json Tokens(std::span<const int32_t> positions, std::span<const int32_t> tokens,
            const Tokenizer& tokenizer) {
  json out = json::array();
  for (size_t i = 0; i < positions.size() && i < tokens.size(); ++i) {
    const int32_t id = tokens[i];
    const bool known = id >= 0 && id < tokenizer.size();
    out.push_back(json::array({positions[i], known ? tokenizer.TokenBytes(id) : std::string(),
                               known && tokenizer.IsSpecial(id) ? 1 : 0}));
  }
  return out;
}

}  // namespace

json StepEventJson(const StepEvent& event, const Tokenizer& tokenizer,
                   const std::string& response_id, bool with_provisional) {
  json out = {
      {"object", "dllm.step"},
      {"id", response_id},
      {"step", event.step},
      {"kind", event.full ? "full" : "partial"},
      {"rows", event.rows},
      {"max_entropy", event.max_committed_entropy},
      // JSON has no infinities: +inf never refreshes on entropy, -inf always refreshes.
      {"tau", std::isnan(event.tau_nats)   ? json(nullptr)
              : std::isinf(event.tau_nats) ? json(event.tau_nats > 0 ? "inf" : "-inf")
                                           : json(event.tau_nats)},
      {"window", json::array({event.window_begin, event.window_end})},
      {"committed", Tokens(event.committed_positions, event.committed_tokens, tokenizer)},
  };
  if (with_provisional) {
    out["provisional"] = Tokens(event.provisional_positions, event.provisional_tokens, tokenizer);
  }
  return out;
}

}  // namespace dllm
