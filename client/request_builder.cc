#include "client/request_builder.h"

#include "absl/strings/str_cat.h"

namespace dllm::client {
namespace {

// Accepts the lower-case suffix of an enum value name: "block" for SCHEDULE_BLOCK.
template <typename Enum>
absl::StatusOr<Enum> ParseEnum(const std::string& flag, const std::string& name,
                               const google::protobuf::EnumDescriptor* descriptor,
                               const std::string& prefix) {
  std::string upper = prefix;
  for (char c : name) upper += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  const google::protobuf::EnumValueDescriptor* value = descriptor->FindValueByName(upper);
  if (value == nullptr || value->number() == 0) {
    std::string choices;
    for (int i = 1; i < descriptor->value_count(); ++i) {
      std::string n = descriptor->value(i)->name().substr(prefix.size());
      for (char& c : n) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      absl::StrAppend(&choices, i > 1 ? "|" : "", n);
    }
    return absl::InvalidArgumentError(
        absl::StrCat(flag, ": unknown value '", name, "' (expected ", choices, ")"));
  }
  return static_cast<Enum>(value->number());
}

void FillChat(const ClientOptions& o, v1::ChatMessages* chat) {
  if (o.system) {
    auto* m = chat->add_messages();
    m->set_role("system");
    m->set_content(*o.system);
  }
  auto* m = chat->add_messages();
  m->set_role("user");
  m->set_content(*o.chat);
}

}  // namespace

absl::StatusOr<v1::GenerateRequest> BuildGenerateRequest(const ClientOptions& o) {
  v1::GenerateRequest r;
  r.set_request_id(o.request_id);
  if (o.ids) {
    r.mutable_token_ids()->mutable_ids()->Assign(o.ids->begin(), o.ids->end());
  } else if (o.chat) {
    FillChat(o, r.mutable_chat());
  } else if (o.prompt) {
    r.set_prompt(*o.prompt);
  }
  if (o.max_new_tokens) r.set_max_new_tokens(*o.max_new_tokens);
  auto* d = r.mutable_decoding();
  if (o.schedule) {
    auto v =
        ParseEnum<v1::Schedule>("--schedule", *o.schedule, v1::Schedule_descriptor(), "SCHEDULE_");
    if (!v.ok()) return v.status();
    d->set_schedule(*v);
  }
  if (o.remasking) {
    auto v = ParseEnum<v1::Remasking>("--remasking", *o.remasking, v1::Remasking_descriptor(),
                                      "REMASKING_");
    if (!v.ok()) return v.status();
    d->set_remasking(*v);
  }
  if (o.steps) d->set_steps(*o.steps);
  if (o.block_length) d->set_block_length(*o.block_length);
  if (o.window) d->set_window(*o.window);
  if (o.threshold) d->set_confidence_threshold(*o.threshold);
  if (o.temperature) d->set_temperature(*o.temperature);
  if (o.top_k) d->set_top_k(*o.top_k);
  if (o.top_p) d->set_top_p(*o.top_p);
  if (o.seed) d->set_seed(*o.seed);
  if (o.eps) d->set_eps(*o.eps);
  if (o.alg_temp) d->set_alg_temp(*o.alg_temp);
  auto* c = r.mutable_cache();
  if (o.cache) {
    auto v = ParseEnum<v1::CachePolicy>("--cache", *o.cache, v1::CachePolicy_descriptor(),
                                        "CACHE_POLICY_");
    if (!v.ok()) return v.status();
    c->set_policy(*v);
  }
  if (o.entropy_threshold) c->set_entropy_threshold(*o.entropy_threshold);
  if (o.recent_k) c->set_recent_k(*o.recent_k);
  if (o.refresh_interval) c->set_refresh_interval(*o.refresh_interval);
  r.mutable_stream()->set_canvas_every_steps(o.canvas_every);
  return r;
}

absl::StatusOr<v1::TokenizeRequest> BuildTokenizeRequest(const ClientOptions& o) {
  v1::TokenizeRequest r;
  if (o.chat) {
    FillChat(o, r.mutable_chat());
  } else if (o.prompt) {
    r.set_prompt(*o.prompt);
  }
  return r;
}

}  // namespace dllm::client
