#include "server/request_mapping.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"
#include "engine/core/status_macros.h"

namespace dllm {
namespace {

absl::Status Invalid(absl::string_view field, absl::string_view reason) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", reason));
}

// Text bytes of the input before templating; bounded before anything tokenizes it.
absl::Status CheckPromptBytes(absl::string_view field, size_t bytes, const LimitsSection& limits) {
  if (limits.max_prompt_bytes > 0 && bytes > static_cast<uint64_t>(limits.max_prompt_bytes)) {
    return Invalid(field, absl::StrCat(bytes, " bytes exceeds limits.max_prompt_bytes (",
                                       limits.max_prompt_bytes, ")"));
  }
  return absl::OkStatus();
}

size_t ChatBytes(const v1::ChatMessages& chat) {
  size_t bytes = 0;
  for (const auto& m : chat.messages()) bytes += m.role().size() + m.content().size();
  return bytes;
}

absl::Status CheckRequestId(const std::string& id) {
  if (id.size() > 128) return Invalid("request_id", "longer than 128 bytes");
  for (unsigned char c : id) {
    if (c < 0x21 || c > 0x7e) {
      return Invalid("request_id", "must be printable ASCII without spaces");
    }
  }
  return absl::OkStatus();
}

absl::Status MapChat(const v1::ChatMessages& chat, const std::string& field,
                     std::vector<ChatMessage>* out) {
  if (chat.messages_size() == 0) return Invalid(field, "at least one message is required");
  for (int i = 0; i < chat.messages_size(); ++i) {
    const auto& m = chat.messages(i);
    if (m.role() != "system" && m.role() != "user" && m.role() != "assistant") {
      return Invalid(absl::StrCat(field, "[", i, "].role"),
                     absl::StrCat("'", m.role(), "' is not system|user|assistant"));
    }
    out->push_back(ChatMessage{m.role(), m.content()});
  }
  return absl::OkStatus();
}

}  // namespace

std::optional<Schedule> FromProto(v1::Schedule s) {
  switch (s) {
    case v1::SCHEDULE_BLOCK:
      return Schedule::kBlock;
    case v1::SCHEDULE_TIMESTEP:
      return Schedule::kTimestep;
    case v1::SCHEDULE_WINDOW:
      return Schedule::kWindow;
    default:
      return std::nullopt;
  }
}

std::optional<Remasking> FromProto(v1::Remasking r) {
  switch (r) {
    case v1::REMASKING_LOW_CONFIDENCE:
      return Remasking::kLowConfidence;
    case v1::REMASKING_RANDOM:
      return Remasking::kRandom;
    case v1::REMASKING_ORIGIN:
      return Remasking::kOrigin;
    case v1::REMASKING_MASKGIT_PLUS:
      return Remasking::kMaskgitPlus;
    case v1::REMASKING_TOPK_MARGIN:
      return Remasking::kTopkMargin;
    case v1::REMASKING_ENTROPY:
      return Remasking::kEntropy;
    default:
      return std::nullopt;
  }
}

std::optional<CachePolicyKind> FromProto(v1::CachePolicy p) {
  switch (p) {
    case v1::CACHE_POLICY_NONE:
      return CachePolicyKind::kNone;
    case v1::CACHE_POLICY_ENTROPY:
      return CachePolicyKind::kEntropy;
    case v1::CACHE_POLICY_DUAL:
      return CachePolicyKind::kDual;
    case v1::CACHE_POLICY_INTERVAL:
      return CachePolicyKind::kInterval;
    case v1::CACHE_POLICY_PREFIX:
      return CachePolicyKind::kPrefix;
    case v1::CACHE_POLICY_D2CACHE:
      return CachePolicyKind::kD2Cache;
    case v1::CACHE_POLICY_ELASTIC:
      return CachePolicyKind::kElastic;
    default:
      return std::nullopt;
  }
}

v1::Schedule ToProto(Schedule s) {
  switch (s) {
    case Schedule::kBlock:
      return v1::SCHEDULE_BLOCK;
    case Schedule::kTimestep:
      return v1::SCHEDULE_TIMESTEP;
    case Schedule::kWindow:
      return v1::SCHEDULE_WINDOW;
  }
  return v1::SCHEDULE_UNSPECIFIED;
}

v1::Remasking ToProto(Remasking r) {
  switch (r) {
    case Remasking::kLowConfidence:
      return v1::REMASKING_LOW_CONFIDENCE;
    case Remasking::kRandom:
      return v1::REMASKING_RANDOM;
    case Remasking::kOrigin:
      return v1::REMASKING_ORIGIN;
    case Remasking::kMaskgitPlus:
      return v1::REMASKING_MASKGIT_PLUS;
    case Remasking::kTopkMargin:
      return v1::REMASKING_TOPK_MARGIN;
    case Remasking::kEntropy:
      return v1::REMASKING_ENTROPY;
  }
  return v1::REMASKING_UNSPECIFIED;
}

v1::CachePolicy ToProto(CachePolicyKind p) {
  switch (p) {
    case CachePolicyKind::kNone:
      return v1::CACHE_POLICY_NONE;
    case CachePolicyKind::kEntropy:
      return v1::CACHE_POLICY_ENTROPY;
    case CachePolicyKind::kDual:
      return v1::CACHE_POLICY_DUAL;
    case CachePolicyKind::kInterval:
      return v1::CACHE_POLICY_INTERVAL;
    case CachePolicyKind::kPrefix:
      return v1::CACHE_POLICY_PREFIX;
    case CachePolicyKind::kD2Cache:
      return v1::CACHE_POLICY_D2CACHE;
    case CachePolicyKind::kElastic:
      return v1::CACHE_POLICY_ELASTIC;
  }
  return v1::CACHE_POLICY_UNSPECIFIED;
}

absl::Status CheckPromptLength(size_t prompt_tokens, const LimitsSection& limits) {
  if (prompt_tokens > static_cast<size_t>(limits.max_prompt_tokens)) {
    return Invalid("input", absl::StrCat("prompt is ", prompt_tokens,
                                         " tokens, exceeds limits.max_prompt_tokens (",
                                         limits.max_prompt_tokens, ")"));
  }
  return absl::OkStatus();
}

int64_t EffectiveMaxPromptBytes(const LimitsSection& limits, const ModelInfo& model) {
  if (limits.max_prompt_bytes > 0) return limits.max_prompt_bytes;
  int64_t tokens = limits.max_prompt_tokens;
  if (model.max_positions > 0) tokens = std::min<int64_t>(tokens, model.max_positions);
  return tokens * kPromptBytesPerToken;
}

absl::StatusOr<GenerationRequest> ToTokenizeRequest(const v1::TokenizeRequest& request,
                                                    const LimitsSection& limits) {
  GenerationRequest out;
  switch (request.input_case()) {
    case v1::TokenizeRequest::kPrompt:
      DLLM_RETURN_IF_ERROR(CheckPromptBytes("prompt", request.prompt().size(), limits));
      out.prompt_text = request.prompt();
      break;
    case v1::TokenizeRequest::kChat:
      DLLM_RETURN_IF_ERROR(CheckPromptBytes("chat.messages", ChatBytes(request.chat()), limits));
      DLLM_RETURN_IF_ERROR(MapChat(request.chat(), "chat.messages", &out.messages));
      break;
    default:
      return Invalid("input", "one of prompt or chat is required");
  }
  return out;
}

absl::StatusOr<GenerationRequest> ToGenerationRequest(const v1::GenerateRequest& request,
                                                      const RequestDefaults& defaults,
                                                      const LimitsSection& limits,
                                                      const ModelInfo& model) {
  GenerationRequest out;
  DLLM_RETURN_IF_ERROR(CheckRequestId(request.request_id()));
  out.id = request.request_id();

  switch (request.input_case()) {
    case v1::GenerateRequest::kPrompt:
      if (request.prompt().empty()) return Invalid("prompt", "must not be empty");
      DLLM_RETURN_IF_ERROR(CheckPromptBytes("prompt", request.prompt().size(), limits));
      out.prompt_text = request.prompt();
      break;
    case v1::GenerateRequest::kChat:
      DLLM_RETURN_IF_ERROR(CheckPromptBytes("chat.messages", ChatBytes(request.chat()), limits));
      DLLM_RETURN_IF_ERROR(MapChat(request.chat(), "chat.messages", &out.messages));
      break;
    case v1::GenerateRequest::kTokenIds: {
      const auto& ids = request.token_ids().ids();
      if (ids.empty()) return Invalid("token_ids.ids", "must not be empty");
      DLLM_RETURN_IF_ERROR(CheckPromptLength(ids.size(), limits));
      for (int i = 0; i < ids.size(); ++i) {
        if (ids[i] < 0 || (model.vocab_size > 0 && ids[i] >= model.vocab_size)) {
          return Invalid(
              absl::StrCat("token_ids.ids[", i, "]"),
              absl::StrCat("id ", ids[i], " is outside [0, vocab_size=", model.vocab_size, ")"));
        }
      }
      out.prompt_ids.assign(ids.begin(), ids.end());
      break;
    }
    default:
      return Invalid("input", "one of prompt, chat or token_ids is required");
  }

  out.max_new_tokens =
      request.has_max_new_tokens() ? request.max_new_tokens() : defaults.max_new_tokens;

  // ---- decoding
  const auto& d = request.decoding();
  DecodingParams& p = out.decoding;
  p = defaults.decoding;
  if (d.schedule() != v1::SCHEDULE_UNSPECIFIED) {
    std::optional<Schedule> s = FromProto(d.schedule());
    if (!s) return Invalid("decoding.schedule", absl::StrCat("unknown value ", d.schedule()));
    p.schedule = *s;
  }
  if (d.remasking() != v1::REMASKING_UNSPECIFIED) {
    std::optional<Remasking> r = FromProto(d.remasking());
    if (!r) return Invalid("decoding.remasking", absl::StrCat("unknown value ", d.remasking()));
    p.remasking = *r;
  }
  if (d.has_steps()) p.steps = d.steps();
  if (d.has_block_length()) {
    p.block_length = d.block_length();
  } else if (p.schedule == Schedule::kBlock && p.block_length > out.max_new_tokens &&
             out.max_new_tokens >= 1) {
    // A default block longer than a short answer would be rejected by the engine; one
    // block covering the whole answer is what the caller evidently wants.
    p.block_length = out.max_new_tokens;
  }
  if (d.has_window()) p.window = d.window();
  if (d.has_confidence_threshold()) p.confidence_threshold = d.confidence_threshold();
  if (d.has_temperature()) p.temperature = d.temperature();
  if (d.has_top_k()) p.top_k = d.top_k();
  if (d.has_top_p()) p.top_p = d.top_p();
  if (d.has_seed()) p.seed = d.seed();
  if (d.has_eps()) p.eps = d.eps();
  if (d.has_alg_temp()) p.alg_temp = d.alg_temp();

  // ---- cache
  const auto& c = request.cache();
  CacheParams& k = out.cache;
  k = defaults.cache;
  if (c.policy() != v1::CACHE_POLICY_UNSPECIFIED) {
    std::optional<CachePolicyKind> policy = FromProto(c.policy());
    if (!policy) return Invalid("cache.policy", absl::StrCat("unknown value ", c.policy()));
    k.policy = *policy;
  }
  if (c.has_entropy_threshold()) k.entropy_threshold = c.entropy_threshold();
  if (c.has_recent_k()) k.recent_k = c.recent_k();
  if (c.has_refresh_interval()) k.refresh_interval = c.refresh_interval();
  if (c.has_shadow_sample_rate()) k.shadow_sample_rate = c.shadow_sample_rate();
  DLLM_RETURN_IF_ERROR(
      ValidateParams(out.max_new_tokens, p, k, ToParamLimits(limits, model.vocab_size)));

  // ---- streaming
  out.snapshot_every_steps = request.stream().canvas_every_steps();
  if (out.snapshot_every_steps < 0 || out.snapshot_every_steps > limits.max_steps) {
    return Invalid(
        "stream.canvas_every_steps",
        out.snapshot_every_steps < 0
            ? absl::StrCat(out.snapshot_every_steps, " is outside [0, ", limits.max_steps, "]")
            : absl::StrCat(out.snapshot_every_steps, " exceeds limits.max_steps (",
                           limits.max_steps, ")"));
  }
  return out;
}

}  // namespace dllm
