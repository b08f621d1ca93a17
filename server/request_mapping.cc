#include "server/request_mapping.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"
#include "engine/core/status_macros.h"
#include "proto/param_proto.h"

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

namespace {

template <typename E>
std::optional<E> EnumFromProto(int number, const google::protobuf::EnumDescriptor& type,
                               std::optional<E> (*parse)(std::string_view)) {
  const google::protobuf::EnumValueDescriptor* value = type.FindValueByNumber(number);
  if (value == nullptr || value->number() == 0) return std::nullopt;
  return parse(EngineEnumName(*value));
}

template <typename P, typename E>
P EnumToProto(E value, const google::protobuf::EnumDescriptor& type) {
  const google::protobuf::EnumValueDescriptor* v = ProtoEnumValue(type, Name(value));
  return static_cast<P>(v != nullptr ? v->number() : 0);
}

}  // namespace

std::optional<Schedule> FromProto(v1::Schedule s) {
  return EnumFromProto(s, *v1::Schedule_descriptor(), &ParseSchedule);
}
std::optional<Remasking> FromProto(v1::Remasking r) {
  return EnumFromProto(r, *v1::Remasking_descriptor(), &ParseRemasking);
}
std::optional<CachePolicyKind> FromProto(v1::CachePolicy p) {
  return EnumFromProto(p, *v1::CachePolicy_descriptor(), &ParseCachePolicy);
}
v1::Schedule ToProto(Schedule s) {
  return EnumToProto<v1::Schedule>(s, *v1::Schedule_descriptor());
}
v1::Remasking ToProto(Remasking r) {
  return EnumToProto<v1::Remasking>(r, *v1::Remasking_descriptor());
}
v1::CachePolicy ToProto(CachePolicyKind p) {
  return EnumToProto<v1::CachePolicy>(p, *v1::CachePolicy_descriptor());
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
  if (request.canvas_size() > 0) {
    if (request.has_max_new_tokens() && request.max_new_tokens() != request.canvas_size()) {
      return Invalid("max_new_tokens",
                     absl::StrCat(request.max_new_tokens(), " differs from the canvas length (",
                                  request.canvas_size(), "); leave it unset"));
    }
    out.max_new_tokens = request.canvas_size();
    bool has_mask = false;
    for (int i = 0; i < request.canvas_size(); ++i) {
      const int32_t id = request.canvas(i);
      if (id < 0 || (model.vocab_size > 0 && id >= model.vocab_size)) {
        return Invalid(
            absl::StrCat("canvas[", i, "]"),
            absl::StrCat("id ", id, " is outside [0, vocab_size=", model.vocab_size, ")"));
      }
      has_mask |= id == model.mask_token_id;
    }
    if (!has_mask) {
      return Invalid("canvas", absl::StrCat("no position to generate (mark them with the mask "
                                            "token, id ",
                                            model.mask_token_id, ")"));
    }
    out.canvas.assign(request.canvas().begin(), request.canvas().end());
  }
  if (!request.suffix().empty()) {
    DLLM_RETURN_IF_ERROR(CheckPromptBytes("suffix", request.suffix().size(), limits));
    out.suffix = request.suffix();
  }

  // ---- decoding and cache: the request's fields over the defaults
  DecodingParams& p = out.decoding;
  CacheParams& k = out.cache;
  p = defaults.decoding;
  k = defaults.cache;
  DLLM_ASSIGN_OR_RETURN(given, ReadProtoParams(request.decoding(), request.cache()));
  given.ApplyTo(&p, &k);
  if (!request.decoding().has_block_length() && p.schedule == Schedule::kBlock &&
      p.block_length > out.max_new_tokens && out.max_new_tokens >= 1) {
    // A default block longer than a short answer would be rejected by the engine; one
    // block covering the whole answer is what the caller evidently wants.
    p.block_length = out.max_new_tokens;
  }
  DLLM_RETURN_IF_ERROR(
      ValidateParams(out.max_new_tokens, p, k, ToParamLimits(limits, model.vocab_size)));
  // Values first (a bad value is the more basic error), then knobs this decoding ignores.
  DLLM_RETURN_IF_ERROR(given.CheckReadBy(p));

  if (request.has_n() && (request.n() < 1 || request.n() > limits.max_choices)) {
    return Invalid("n", request.n() < 1 ? absl::StrCat(request.n(), " must be >= 1")
                                        : absl::StrCat(request.n(), " exceeds limits.max_choices (",
                                                       limits.max_choices, ")"));
  }
  if (request.has_logprobs()) {
    if (request.logprobs() < 0 || request.logprobs() > kMaxTopLogprobs) {
      return Invalid("logprobs",
                     absl::StrCat(request.logprobs(), " is outside [0, ", kMaxTopLogprobs, "]"));
    }
    out.logprobs = request.logprobs();
  }

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
