#include "server/grpc/choice_calls.h"

#include <utility>

#include "server/grpc/status_mapping.h"

namespace dllm {
namespace {

// Forwards one choice's engine events to its reactor with the choice's index.
class ChoiceSink final : public EventSink {
 public:
  ChoiceSink(std::shared_ptr<ChoiceEvents> owner, int index)
      : owner_(std::move(owner)), index_(index) {}
  void OnCommit(const CommitEvent& event) override { owner_->OnChoiceCommit(index_, event); }
  void OnSnapshot(const SnapshotEvent& event) override { owner_->OnChoiceSnapshot(index_, event); }
  void OnFinal(const FinalEvent& event) override { owner_->OnChoiceFinal(index_, event); }

 private:
  const std::shared_ptr<ChoiceEvents> owner_;
  const int index_;
};

}  // namespace

ChoiceCalls::ChoiceCalls(Gateway* gateway, const char* method, const char* protocol)
    : gateway_(gateway), method_(method), protocol_(protocol) {
  calls_.push_back(std::make_unique<GatewayCall>(gateway_, method_, protocol_));
}

const std::string& ChoiceCalls::Identify(const v1::GenerateRequest& request) {
  const std::string& id = calls_[0]->Identify(request);
  const int n = request.has_n() && request.n() >= 1 && request.n() <= kMaxChoices ? request.n() : 1;
  if (static_cast<int>(calls_.size()) != n) {
    v1::GenerateRequest same_id;
    same_id.set_request_id(id);
    calls_.resize(1);
    for (int i = 1; i < n; ++i) {
      calls_.push_back(std::make_unique<GatewayCall>(gateway_, method_, protocol_));
      calls_.back()->Identify(same_id);
    }
  }
  return id;
}

absl::Status ChoiceCalls::Start(Gateway::TokenCheck token_check,
                                std::optional<std::string_view> authorization, absl::Time deadline,
                                const v1::GenerateRequest& request,
                                const std::shared_ptr<ChoiceEvents>& owner, int* started) {
  Identify(request);
  *started = 0;
  for (int i = 0; i < size(); ++i) {
    absl::Status status = calls_[i]->Start(
        // The token is checked once per call: the first choice's check passed it.
        i == 0 ? token_check : Gateway::TokenCheck::kAlreadyChecked, authorization, deadline,
        request, std::make_shared<ChoiceSink>(owner, i),
        [i](GenerationRequest* r) { r->decoding.seed += static_cast<uint64_t>(i); });
    if (!status.ok()) {
      for (int j = 0; j < i; ++j) calls_[j]->Cancel();
      return status;
    }
    *started = i + 1;
  }
  return absl::OkStatus();
}

void ChoiceCalls::Cancel() {
  for (auto& call : calls_) call->Cancel();
}

void ChoiceCalls::Close() {
  for (auto& call : calls_) call->Close();
}

absl::Status CallStatus(const std::vector<absl::Status>& statuses) {
  for (const absl::Status& s : statuses) {
    if (s.ok()) return s;
  }
  return statuses.empty() ? absl::OkStatus() : statuses.front();
}

void FillChoiceError(const std::string& request_id, int index, const absl::Status& status,
                     v1::GenerateResponse* out) {
  out->set_request_id(request_id);
  out->set_index(index);
  const grpc::Status wire = ToGrpcStatus(status);
  out->mutable_error()->set_code(static_cast<int>(wire.error_code()));
  out->mutable_error()->set_message(wire.error_message());
}

}  // namespace dllm
