#include "client/request_builder.h"

#include "absl/strings/str_cat.h"
#include "proto/param_proto.h"

namespace dllm::client {
namespace {

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
  for (const auto& [field, value] : o.params.values()) {
    SetProtoParam(*field, value, r.mutable_decoding(), r.mutable_cache());
  }
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
