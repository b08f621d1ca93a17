#include "server/http/http_openai_mapping.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "engine/core/param_fields.h"
#include "engine/core/status_macros.h"
#include "proto/param_proto.h"
#include "server/config.h"
#include "server/http/http_status_mapping.h"
#include "server/request_mapping.h"

namespace dllm {
namespace {

using nlohmann::json;

constexpr size_t kMaxStops = 4;  // as OpenAI
constexpr size_t kMaxStopBytes = 256;

absl::Status Invalid(absl::string_view field, absl::string_view reason) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", reason));
}

const char* TypeName(const json& v) { return v.type_name(); }

absl::StatusOr<int32_t> GetInt32(const json& v, absl::string_view field) {
  if (!v.is_number_integer()) {
    return Invalid(field, absl::StrCat("must be an integer, not ", TypeName(v)));
  }
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int32_t>::max())) {
      return Invalid(field, absl::StrCat(u, " is out of range"));
    }
    return static_cast<int32_t>(u);
  }
  const int64_t i = v.get<int64_t>();
  if (i < std::numeric_limits<int32_t>::min() || i > std::numeric_limits<int32_t>::max()) {
    return Invalid(field, absl::StrCat(i, " is out of range"));
  }
  return static_cast<int32_t>(i);
}

absl::StatusOr<uint64_t> GetUint64(const json& v, absl::string_view field) {
  if (!v.is_number_integer()) {
    return Invalid(field, absl::StrCat("must be an integer, not ", TypeName(v)));
  }
  if (!v.is_number_unsigned() && v.get<int64_t>() < 0) {
    return Invalid(field, absl::StrCat(v.get<int64_t>(), " must be >= 0"));
  }
  return v.get<uint64_t>();
}

absl::StatusOr<float> GetFloat(const json& v, absl::string_view field) {
  if (!v.is_number()) return Invalid(field, absl::StrCat("must be a number, not ", TypeName(v)));
  const double d = v.get<double>();
  if (!std::isfinite(d)) return Invalid(field, "must be finite");
  return static_cast<float>(d);
}

absl::StatusOr<bool> GetBool(const json& v, absl::string_view field) {
  if (!v.is_boolean()) return Invalid(field, absl::StrCat("must be a boolean, not ", TypeName(v)));
  return v.get<bool>();
}

absl::StatusOr<std::string> GetString(const json& v, absl::string_view field) {
  if (!v.is_string()) return Invalid(field, absl::StrCat("must be a string, not ", TypeName(v)));
  return v.get<std::string>();
}

// One value of a request field as JSON: numbers by the field's type; enums by the engine's
// name ("block") or the proto's ("SCHEDULE_BLOCK").
absl::StatusOr<ParamValue> GetParam(const ParamField& f, const json& v,
                                    const google::protobuf::FieldDescriptor& proto_field) {
  const std::string field = f.FullName();
  switch (f.type) {
    case ParamType::kInt32: {
      DLLM_ASSIGN_OR_RETURN(x, GetInt32(v, field));
      return ParamValue(int64_t{x});
    }
    case ParamType::kUint64: {
      DLLM_ASSIGN_OR_RETURN(x, GetUint64(v, field));
      return ParamValue(x);
    }
    case ParamType::kFloat: {
      // +inf (tau's "never refresh because of entropy") has no JSON number: a large value.
      DLLM_ASSIGN_OR_RETURN(x, GetFloat(v, field));
      return ParamValue(static_cast<double>(x));
    }
    case ParamType::kEnum: {
      DLLM_ASSIGN_OR_RETURN(name, GetString(v, field));
      if (const auto* proto = proto_field.enum_type()->FindValueByName(name);
          proto != nullptr && proto->number() != 0) {
        name = EngineEnumName(*proto);
      }
      for (size_t i = 0; i < f.choices.size(); ++i) {
        if (f.choices[i] == name) return ParamValue(static_cast<int64_t>(i));
      }
      return Invalid(field,
                     absl::StrCat("unknown value '", name, "' (expected ", DomainText(f), ")"));
    }
  }
  return Invalid(field, "unsupported type");
}

// The "decoding" or "cache" object: the fields of engine/core/param_fields.h's table by name.
absl::Status ParseParams(ParamSection section, const json& obj, v1::GenerateRequest* request) {
  const absl::string_view section_name = SectionName(section);
  if (!obj.is_object()) return Invalid(section_name, "must be an object");
  for (const auto& [key, v] : obj.items()) {
    if (v.is_null()) continue;
    const ParamField* f = FindParamField(section, key);
    const google::protobuf::FieldDescriptor* proto = f ? ProtoFieldOf(*f) : nullptr;
    if (f == nullptr || f->name != key || proto == nullptr) {
      return Invalid(absl::StrCat(section_name, ".", key), "unknown field");
    }
    DLLM_ASSIGN_OR_RETURN(value, GetParam(*f, v, *proto));
    SetProtoParam(*f, value, request->mutable_decoding(), request->mutable_cache());
  }
  return absl::OkStatus();
}

// Chat content: a string, or an array of {"type": "text", "text": ...} parts.
absl::StatusOr<std::string> ParseContent(const json& v, const std::string& field) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_null()) return std::string();
  if (!v.is_array()) return Invalid(field, "must be a string or an array of text parts");
  std::string text;
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string part = absl::StrCat(field, "[", i, "]");
    const json& p = v[i];
    if (!p.is_object() || !p.contains("type") || p["type"] != "text" || !p.contains("text") ||
        !p["text"].is_string()) {
      return Invalid(part, "only {\"type\": \"text\", \"text\": ...} parts are supported");
    }
    text += p["text"].get<std::string>();
  }
  return text;
}

absl::Status ParseMessages(const json& v, v1::ChatMessages* chat) {
  if (!v.is_array()) return Invalid("messages", "must be an array");
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string field = absl::StrCat("messages[", i, "]");
    const json& m = v[i];
    if (!m.is_object()) return Invalid(field, "must be an object");
    v1::ChatMessage* out = chat->add_messages();
    for (const auto& [key, value] : m.items()) {
      const std::string sub = absl::StrCat(field, ".", key);
      if (key == "role") {
        DLLM_ASSIGN_OR_RETURN(role, GetString(value, sub));
        out->set_role(role);
      } else if (key == "content") {
        DLLM_ASSIGN_OR_RETURN(content, ParseContent(value, sub));
        out->set_content(content);
      } else if (key == "name") {
        // OpenAI's participant name: accepted and ignored (templates have no slot for it).
      } else {
        return Invalid(sub, "unknown field");
      }
    }
    if (!m.contains("role")) return Invalid(absl::StrCat(field, ".role"), "is required");
  }
  return absl::OkStatus();
}

absl::Status ParsePrompt(const json& v, v1::GenerateRequest* request) {
  if (v.is_string()) {
    request->set_prompt(v.get<std::string>());
    return absl::OkStatus();
  }
  if (!v.is_array()) return Invalid("prompt", "must be a string or an array");
  if (v.size() == 1 && v[0].is_string()) {
    request->set_prompt(v[0].get<std::string>());
    return absl::OkStatus();
  }
  if (!v.empty() && v[0].is_number_integer()) {
    for (size_t i = 0; i < v.size(); ++i) {
      DLLM_ASSIGN_OR_RETURN(id, GetInt32(v[i], absl::StrCat("prompt[", i, "]")));
      request->mutable_token_ids()->add_ids(id);
    }
    return absl::OkStatus();
  }
  return Invalid("prompt",
                 "must be a string, one string in an array, or an array of token ids "
                 "(batched prompts are not supported)");
}

// Fields that OpenAI clients may send with their "off" value; anything else is unsupported.
bool IsOff(const json& v) {
  return v.is_null() || (v.is_boolean() && !v.get<bool>()) ||
         (v.is_number() && v.get<double>() == 0) || (v.is_object() && v.empty());
}

json CacheStatsJson(const v1::CacheStats& c) {
  return {{"steps", c.steps()},
          {"full_steps", c.full_steps()},
          {"partial_steps", c.partial_steps()},
          {"refresh_ratio", c.refresh_ratio()},
          {"rows_computed", c.rows_computed()},
          {"mean_committed_entropy", c.mean_committed_entropy()},
          {"max_committed_entropy", c.max_committed_entropy()},
          {"tau_switch_step", c.has_tau_switch_step() ? json(c.tau_switch_step()) : json(nullptr)}};
}

json TimingsJson(const v1::Timings& t) {
  return {{"queue_seconds", t.queue_seconds()},
          {"first_commit_seconds", t.first_commit_seconds()},
          {"total_seconds", t.total_seconds()},
          {"decision_seconds", t.decision_seconds()}};
}

json UsageJson(const v1::Usage& u) {
  return {{"prompt_tokens", u.prompt_tokens()},
          {"completion_tokens", u.generated_tokens()},
          {"total_tokens", u.prompt_tokens() + u.generated_tokens()}};
}

bool IsChat(const OpenAiRequest& r) { return r.endpoint == OpenAiEndpoint::kChatCompletions; }

json Envelope(const OpenAiRequest& request, const std::string& id, int64_t created,
              const char* chat_object, const char* completion_object) {
  return {{"id", id},
          {"object", IsChat(request) ? chat_object : completion_object},
          {"created", created},
          {"model", request.model}};
}

// A JSON DOM costs far more than its text: a 4 MB body of nested arrays became ~145 MB of
// nlohmann::json nodes (and the allocator kept them). Bound the nesting depth and the number
// of values with one pass over the text before any node is built. Strings are skipped, so
// brackets inside them do not count; malformed JSON is left to the parser.
absl::Status CheckJsonShape(std::string_view body) {
  int depth = 0;
  int64_t values = 0;
  bool in_string = false;
  bool escaped = false;
  for (const char c : body) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    switch (c) {
      case '"':
        in_string = true;
        break;
      case '[':
      case '{':
        if (++depth > kMaxJsonDepth) {
          return Invalid("body",
                         absl::StrCat("JSON nested deeper than ", kMaxJsonDepth, " levels"));
        }
        [[fallthrough]];
      case ',':
        if (++values > kMaxJsonValues) {
          return Invalid("body", absl::StrCat("more than ", kMaxJsonValues, " JSON values"));
        }
        break;
      case ']':
      case '}':
        --depth;
        break;
      default:
        break;
    }
  }
  return absl::OkStatus();
}

// ParseOpenAiRequest's state while it goes over the body's keys.
struct OpenAiParse {
  OpenAiRequest out;
  bool chat = false;
  const char* input_key = nullptr;  // "messages" or "prompt"
  std::optional<int32_t> max_tokens;
  bool has_model = false;
  bool has_input = false;
  // Chat: logprobs (bool) and top_logprobs (int) may come in either order.
  bool chat_logprobs = false;
  std::optional<int32_t> top_logprobs;
};

// Chat completions: "logprobs": bool and "top_logprobs": 0..20 (which needs logprobs true).
// Completions: "logprobs": N, the alternatives per token (OpenAI caps it at 5; this server
// at 20). Both end up as GenerateRequest.logprobs (alternatives); the range is checked by
// request_mapping like gRPC's.
absl::Status ParseLogprobsKey(const std::string& key, const json& v, OpenAiParse* p) {
  if (v.is_null()) return absl::OkStatus();
  if (p->chat && key == "logprobs") {
    DLLM_ASSIGN_OR_RETURN(b, GetBool(v, key));
    p->chat_logprobs = b;
  } else if (p->chat) {
    DLLM_ASSIGN_OR_RETURN(n, GetInt32(v, key));
    p->top_logprobs = n;
    p->out.field_names.emplace_back("logprobs", key);
  } else if (key == "logprobs") {
    DLLM_ASSIGN_OR_RETURN(n, GetInt32(v, key));
    p->out.request.set_logprobs(n);
  } else {
    return Invalid(key, "unknown field (completions take \"logprobs\": N)");
  }
  return absl::OkStatus();
}

absl::Status ParseMaxTokens(const std::string& key, const json& v, OpenAiParse* p) {
  if (v.is_null()) return absl::OkStatus();
  DLLM_ASSIGN_OR_RETURN(n, GetInt32(v, key));
  if (p->max_tokens && *p->max_tokens != n) {
    return Invalid(key, "max_tokens and max_completion_tokens disagree");
  }
  p->max_tokens = n;
  p->out.request.set_max_new_tokens(n);
  p->out.field_names.emplace_back("max_new_tokens", key);
  return absl::OkStatus();
}

// temperature, top_p, top_k, seed (-> decoding.*) and n.
absl::Status ParseSamplingKey(const std::string& key, const json& v, OpenAiRequest* out) {
  if (v.is_null()) return absl::OkStatus();
  v1::GenerateRequest& req = out->request;
  if (key == "temperature" || key == "top_p") {
    DLLM_ASSIGN_OR_RETURN(x, GetFloat(v, key));
    if (key == "temperature") {
      req.mutable_decoding()->set_temperature(x);
    } else {
      req.mutable_decoding()->set_top_p(x);
    }
    out->field_names.emplace_back(absl::StrCat("decoding.", key), key);
  } else if (key == "top_k") {
    DLLM_ASSIGN_OR_RETURN(x, GetInt32(v, key));
    req.mutable_decoding()->set_top_k(x);
    out->field_names.emplace_back("decoding.top_k", key);
  } else if (key == "seed") {
    DLLM_ASSIGN_OR_RETURN(x, GetUint64(v, key));
    req.mutable_decoding()->set_seed(x);
    out->field_names.emplace_back("decoding.seed", key);
  } else if (key == "n") {
    DLLM_ASSIGN_OR_RETURN(x, GetInt32(v, key));
    if (x < 1) return Invalid("n", absl::StrCat(x, " is not a number of choices (>= 1)"));
    out->n = x;
  }
  return absl::OkStatus();
}

// stream and stream_options.
absl::Status ParseStreamingKey(const std::string& key, const json& v, OpenAiRequest* out) {
  if (v.is_null()) return absl::OkStatus();
  if (key == "stream") {
    DLLM_ASSIGN_OR_RETURN(b, GetBool(v, key));
    out->stream = b;
    return absl::OkStatus();
  }
  if (!v.is_object()) return Invalid(key, "must be an object");
  for (const auto& [k, x] : v.items()) {
    // Usage is always sent in the final chunk, so include_usage changes nothing.
    if (k != "include_usage" && k != "include_steps") {
      return Invalid(absl::StrCat(key, ".", k), "unknown field");
    }
    if (!x.is_null() && !x.is_boolean()) {
      return Invalid(absl::StrCat(key, ".", k), "must be a boolean");
    }
    if (k == "include_steps") out->include_steps = x.is_boolean() && x.get<bool>();
  }
  return absl::OkStatus();
}

absl::Status ParseStop(const json& v, std::vector<std::string>* stop) {
  if (v.is_null()) return absl::OkStatus();
  const json list = v.is_string() ? json::array({v}) : v;
  if (!list.is_array() || list.size() > kMaxStops) {
    return Invalid("stop",
                   absl::StrCat("must be a string or an array of at most ", kMaxStops, " strings"));
  }
  for (size_t i = 0; i < list.size(); ++i) {
    DLLM_ASSIGN_OR_RETURN(s, GetString(list[i], absl::StrCat("stop[", i, "]")));
    if (s.size() > kMaxStopBytes) {
      return Invalid(absl::StrCat("stop[", i, "]"),
                     absl::StrCat("longer than ", kMaxStopBytes, " bytes"));
    }
    if (!s.empty()) stop->push_back(s);
  }
  return absl::OkStatus();
}

// user (ignored), and the OpenAI fields this server accepts only at their "off" value.
absl::Status ParseIgnoredKey(const std::string& key, const json& v) {
  if (key == "user") {
    if (!v.is_null() && !v.is_string()) return Invalid(key, "must be a string");
    return absl::OkStatus();
  }
  if (!IsOff(v)) return Invalid(key, "is not supported (only its default value)");
  return absl::OkStatus();
}

// One key of the body; a key not named here is an unknown field.
absl::Status ParseRequestKey(const std::string& key, const json& v, OpenAiParse* p) {
  v1::GenerateRequest& req = p->out.request;
  if (key == "model") {
    DLLM_ASSIGN_OR_RETURN(m, GetString(v, key));
    p->out.model = m;
    p->has_model = true;
    return absl::OkStatus();
  }
  if (key == p->input_key) {
    p->has_input = true;
    return p->chat ? ParseMessages(v, req.mutable_chat()) : ParsePrompt(v, &req);
  }
  if (key == "max_tokens" || key == "max_completion_tokens") return ParseMaxTokens(key, v, p);
  if (key == "temperature" || key == "top_p" || key == "top_k" || key == "seed" || key == "n") {
    return ParseSamplingKey(key, v, &p->out);
  }
  if (key == "stream" || key == "stream_options") return ParseStreamingKey(key, v, &p->out);
  if (key == "stop") return ParseStop(v, &p->out.stop);
  if (key == "logprobs" || key == "top_logprobs") return ParseLogprobsKey(key, v, p);
  if (key == "canvas") {
    if (v.is_null()) return absl::OkStatus();
    if (!v.is_array()) return Invalid(key, "must be an array of token ids");
    for (size_t i = 0; i < v.size(); ++i) {
      DLLM_ASSIGN_OR_RETURN(id, GetInt32(v[i], absl::StrCat(key, "[", i, "]")));
      req.add_canvas(id);
    }
    return absl::OkStatus();
  }
  if (key == "suffix" && !p->chat) {
    if (v.is_null()) return absl::OkStatus();
    DLLM_ASSIGN_OR_RETURN(suffix, GetString(v, key));
    req.set_suffix(suffix);
    return absl::OkStatus();
  }
  if (key == "user" || key == "presence_penalty" || key == "frequency_penalty" ||
      key == "logit_bias") {
    return ParseIgnoredKey(key, v);
  }
  if (key == "decoding") return ParseParams(ParamSection::kDecoding, v, &req);
  if (key == "cache") return ParseParams(ParamSection::kCache, v, &req);
  return Invalid(key, "unknown field");
}

}  // namespace

absl::StatusOr<OpenAiRequest> ParseOpenAiRequest(OpenAiEndpoint endpoint, std::string_view body) {
  if (absl::Status st = CheckJsonShape(body); !st.ok()) return st;
  json root = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded()) return Invalid("body", "is not valid JSON");
  if (!root.is_object()) return Invalid("body", "must be a JSON object");
  OpenAiParse p;
  p.out.endpoint = endpoint;
  p.chat = endpoint == OpenAiEndpoint::kChatCompletions;
  p.input_key = p.chat ? "messages" : "prompt";
  for (const auto& [key, v] : root.items()) {
    if (absl::Status st = ParseRequestKey(key, v, &p); !st.ok()) return st;
  }
  if (!p.has_model) return Invalid("model", "is required");
  if (p.top_logprobs.has_value() && !p.chat_logprobs) {
    return Invalid("top_logprobs", "needs \"logprobs\": true");
  }
  if (p.chat_logprobs) p.out.request.set_logprobs(p.top_logprobs.value_or(0));
  if (!p.has_input) return Invalid(p.input_key, "is required");
  if (p.out.include_steps && !p.out.stream) {
    return Invalid("stream_options.include_steps", "needs \"stream\": true");
  }
  if (p.chat) {
    p.out.field_names.emplace_back("chat.messages", "messages");
  } else if (p.out.request.has_token_ids()) {
    p.out.field_names.emplace_back("token_ids.ids", "prompt");
  }
  return std::move(p.out);
}

absl::Status RenameFieldInError(const absl::Status& status, const OpenAiRequest& request) {
  if (status.code() != absl::StatusCode::kInvalidArgument) return status;
  const absl::string_view message = status.message();
  for (const auto& [proto, json_name] : request.field_names) {
    if (absl::StartsWith(message, proto)) {
      const absl::string_view rest = message.substr(proto.size());
      if (rest.empty() || rest[0] == ':' || rest[0] == '[' || rest[0] == '.') {
        return absl::InvalidArgumentError(absl::StrCat(json_name, rest));
      }
    }
  }
  return status;
}

json OpenAiFinishReason(v1::FinishReason reason) {
  switch (reason) {
    case v1::FINISH_REASON_EOS:
      return "stop";
    case v1::FINISH_REASON_LENGTH:
      return "length";
    case v1::FINISH_REASON_STEP_LIMIT:
      return "step_limit";
    default:
      return nullptr;
  }
}

namespace {

json BytesJson(const std::string& bytes) {
  json out = json::array();
  for (unsigned char c : bytes) out.push_back(static_cast<int>(c));
  return out;
}

}  // namespace

json LogprobsJson(const OpenAiRequest& request,
                  const google::protobuf::RepeatedPtrField<v1::TokenLogprob>& tokens, int count,
                  int64_t* text_offset) {
  count = std::min(count, tokens.size());
  if (IsChat(request)) {
    json content = json::array();
    for (int i = 0; i < count; ++i) {
      const v1::TokenLogprob& t = tokens[i];
      json top = json::array();
      for (const v1::TopLogprob& a : t.top_logprobs()) {
        top.push_back({{"token", a.token_bytes()},
                       {"logprob", a.logprob()},
                       {"bytes", BytesJson(a.token_bytes())}});
      }
      content.push_back({{"token", t.token_bytes()},
                         {"logprob", t.logprob()},
                         {"bytes", BytesJson(t.token_bytes())},
                         {"top_logprobs", std::move(top)}});
    }
    return {{"content", std::move(content)}, {"refusal", nullptr}};
  }
  json out = {{"tokens", json::array()},
              {"token_logprobs", json::array()},
              {"top_logprobs", json::array()},
              {"text_offset", json::array()}};
  for (int i = 0; i < count; ++i) {
    const v1::TokenLogprob& t = tokens[i];
    out["tokens"].push_back(t.token_bytes());
    out["token_logprobs"].push_back(t.logprob());
    json top = json::object();
    for (const v1::TopLogprob& a : t.top_logprobs()) top[a.token_bytes()] = a.logprob();
    out["top_logprobs"].push_back(std::move(top));
    out["text_offset"].push_back(*text_offset);
    *text_offset += static_cast<int64_t>(t.token_bytes().size());
  }
  return out;
}

int TokensCoveringText(const google::protobuf::RepeatedPtrField<v1::TokenLogprob>& tokens,
                       size_t text_bytes) {
  size_t offset = 0;
  int count = 0;
  for (const v1::TokenLogprob& t : tokens) {
    if (offset >= text_bytes) break;
    offset += t.token_bytes().size();
    ++count;
  }
  return count;
}

json CompletionResponseJson(const OpenAiRequest& request, const std::string& id, int64_t created,
                            const v1::GenerateResponse& response) {
  json out = Envelope(request, id, created, "chat.completion", "text_completion");
  json choice = {{"index", 0},
                 {"finish_reason", OpenAiFinishReason(response.finish_reason())},
                 {"logprobs", nullptr}};
  if (request.request.has_logprobs()) {
    // The tokens whose bytes make up the returned text (a stop string may have cut it).
    int64_t offset = 0;
    choice["logprobs"] =
        LogprobsJson(request, response.logprobs(),
                     TokensCoveringText(response.logprobs(), response.text().size()), &offset);
  }
  if (IsChat(request)) {
    choice["message"] = {{"role", "assistant"}, {"content", response.text()}};
  } else {
    choice["text"] = response.text();
  }
  out["choices"] = json::array({std::move(choice)});
  out["usage"] = UsageJson(response.usage());
  out["cache_stats"] = CacheStatsJson(response.cache_stats());
  out["timings"] = TimingsJson(response.timings());
  return out;
}

json DeltaChunkJson(const OpenAiRequest& request, const std::string& id, int64_t created,
                    std::string_view delta, bool first, json logprobs) {
  json out = Envelope(request, id, created, "chat.completion.chunk", "text_completion");
  json choice = {{"index", 0}, {"finish_reason", nullptr}, {"logprobs", std::move(logprobs)}};
  if (IsChat(request)) {
    json d = {{"content", std::string(delta)}};
    if (first) d["role"] = "assistant";
    choice["delta"] = std::move(d);
  } else {
    choice["text"] = std::string(delta);
  }
  out["choices"] = json::array({std::move(choice)});
  return out;
}

json FinalChunkJson(const OpenAiRequest& request, const std::string& id, int64_t created,
                    const v1::GenerateResponse& response) {
  json out = Envelope(request, id, created, "chat.completion.chunk", "text_completion");
  json choice = {{"index", 0},
                 {"finish_reason", OpenAiFinishReason(response.finish_reason())},
                 {"logprobs", nullptr}};
  if (IsChat(request)) {
    choice["delta"] = json::object();
  } else {
    choice["text"] = "";
  }
  out["choices"] = json::array({std::move(choice)});
  out["usage"] = UsageJson(response.usage());
  out["cache_stats"] = CacheStatsJson(response.cache_stats());
  out["timings"] = TimingsJson(response.timings());
  return out;
}

namespace {

json SummedUsage(const std::vector<ChoiceOutcome>& choices) {
  int64_t prompt = 0, completion = 0;
  for (const ChoiceOutcome& c : choices) {
    if (c.response == nullptr) continue;
    prompt = c.response->usage().prompt_tokens();  // the same prompt for every choice
    completion += c.response->usage().generated_tokens();
  }
  return {{"prompt_tokens", prompt},
          {"completion_tokens", completion},
          {"total_tokens", prompt + completion}};
}

}  // namespace

json MultiChoiceResponseJson(const OpenAiRequest& request, const std::string& id, int64_t created,
                             const std::vector<ChoiceOutcome>& choices) {
  json out = Envelope(request, id, created, "chat.completion", "text_completion");
  out["choices"] = json::array();
  for (size_t i = 0; i < choices.size(); ++i) {
    const ChoiceOutcome& c = choices[i];
    json choice;
    if (c.response != nullptr) {
      json one = CompletionResponseJson(request, id, created, *c.response);
      choice = std::move(one["choices"][0]);
      choice["cache_stats"] = std::move(one["cache_stats"]);
      choice["timings"] = std::move(one["timings"]);
    } else {
      choice = {
          {"finish_reason", nullptr}, {"logprobs", nullptr}, {"error", HttpErrorObject(c.status)}};
      if (IsChat(request)) {
        choice["message"] = {{"role", "assistant"}, {"content", nullptr}};
      } else {
        choice["text"] = nullptr;
      }
    }
    choice["index"] = static_cast<int>(i);
    out["choices"].push_back(std::move(choice));
  }
  out["usage"] = SummedUsage(choices);
  return out;
}

json ChoiceErrorChunkJson(const OpenAiRequest& request, const std::string& id, int64_t created,
                          int index, const absl::Status& status) {
  json out = Envelope(request, id, created, "chat.completion.chunk", "text_completion");
  out["choices"] = json::array({{{"index", index},
                                 {"finish_reason", nullptr},
                                 {"logprobs", nullptr},
                                 {"error", HttpErrorObject(status)}}});
  return out;
}

json UsageChunkJson(const OpenAiRequest& request, const std::string& id, int64_t created,
                    const std::vector<ChoiceOutcome>& choices) {
  json out = Envelope(request, id, created, "chat.completion.chunk", "text_completion");
  out["choices"] = json::array();
  out["usage"] = SummedUsage(choices);
  return out;
}

json ModelListJson(const std::string& model, int64_t created) {
  return {{"object", "list"},
          {"data", json::array({{{"id", model},
                                 {"object", "model"},
                                 {"created", created},
                                 {"owned_by", "dllm-serve"}}})}};
}

std::string DumpJson(const json& value) {
  return value.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace dllm
