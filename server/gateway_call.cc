#include "server/gateway_call.h"

#include <utility>

#include "absl/time/clock.h"

namespace dllm {

GatewayCall::GatewayCall(Gateway* gateway, const char* method, const char* protocol)
    : gateway_(gateway), method_(method), protocol_(protocol), start_(absl::Now()) {}

GatewayCall::~GatewayCall() { Close(); }

const std::string& GatewayCall::Identify(const v1::GenerateRequest& request) {
  if (!identified_) {
    request_id_ = gateway_->LogId(request);
    identified_ = true;
  }
  return request_id_;
}

absl::Status GatewayCall::Start(Gateway::TokenCheck token_check,
                                std::optional<std::string_view> authorization, absl::Time deadline,
                                const v1::GenerateRequest& request, std::shared_ptr<EventSink> sink,
                                const std::function<void(GenerationRequest*)>& adjust) {
  Identify(request);
  absl::StatusOr<Gateway::Admitted> admitted =
      gateway_->Admit(token_check, authorization, deadline, request, request_id_);
  if (!admitted.ok()) return admitted.status();
  if (adjust) adjust(&admitted->request);
  Engine* engine = admitted->engine;
  engine_ = engine;
  // Counted before Submit: the engine may finish the request, and the transport reply and
  // close it, before Submit returns.
  gateway_->CallOpened();
  opened_ = true;
  absl::StatusOr<RequestId> id = engine->Submit(std::move(admitted->request), std::move(sink));
  if (!id.ok()) return id.status();
  link_.Bind(engine, *id, deadline);
  return absl::OkStatus();
}

absl::Status GatewayCall::FinalStatus(const FinalEvent& event) const {
  return gateway_->FinalStatus(event, link_);
}

absl::Status GatewayCall::CheckReplySize(const google::protobuf::Message& reply) const {
  return gateway_->CheckReplySize(reply);
}

void GatewayCall::Record(const absl::Status& status, const FinalEvent* event) {
  if (recorded_.exchange(true)) return;
  gateway_->RecordCall(method_, request_id_, status, event, start_, protocol_);
}

void GatewayCall::Close() {
  if (opened_.exchange(false)) gateway_->CallClosed();
}

}  // namespace dllm
