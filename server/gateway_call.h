// GatewayCall: one generation call through the Gateway (gateway.h), from its request to the
// transport's last reply. Each transport's call object (the gRPC reactors, the HTTP
// generation) owns one and does no admission, counting or linking of its own:
//   - Start: availability and auth, admission (defaults, limits, tokenizing once), then the
//     open-call count that shutdown waits on, Engine::Submit and the link that carries a
//     client's cancellation to the engine;
//   - FinalStatus / CheckReplySize: the status a finished generation ends with, and the
//     server.max_send_message_bytes bound on each reply;
//   - Record: the call record (metric and `request_done` line), once per call;
//   - Close (or the destructor): the transport is done with the call.
//
// Thread-safety: Start, Record and Close are called from the transport's threads; Cancel,
// FinalStatus and CheckReplySize from any thread (engine events arrive on the engine worker,
// possibly before Start returns). request_id() is stable once Start has been called.
#ifndef DLLM_SERVER_GATEWAY_CALL_H_
#define DLLM_SERVER_GATEWAY_CALL_H_

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "dllm/v1/dllm.pb.h"
#include "engine/engine.h"
#include "server/engine_request_link.h"
#include "server/gateway.h"

namespace dllm {

class GatewayCall {
 public:
  // `method` ("Generate", "ChatCompletions") and `protocol` ("grpc", "http") label the call
  // record; both are static strings. `gateway` is not owned and outlives the call.
  GatewayCall(Gateway* gateway, const char* method, const char* protocol);
  ~GatewayCall();
  GatewayCall(const GatewayCall&) = delete;
  GatewayCall& operator=(const GatewayCall&) = delete;

  // The id the call is logged and answered under (Gateway::LogId of `request`: the caller's
  // request_id when valid, else a server-assigned one). Fixed by the first call of Identify or
  // Start, so that a call refused before Start is logged under the same id.
  const std::string& Identify(const v1::GenerateRequest& request);
  const std::string& request_id() const { return request_id_; }
  // The engine that runs the call (after a successful Start), else null.
  Engine* engine() const { return engine_; }

  // Admits `request` (availability; the token, unless `token_check` says this call already
  // passed it; defaults, limits, tokenizing) with the caller's deadline (InfiniteFuture when
  // none), lets `adjust` set what the transport adds to the admitted request (may be null),
  // then submits it with `sink` as its event sink. An error means nothing was submitted: the
  // transport replies with it and Records it.
  absl::Status Start(Gateway::TokenCheck token_check, std::optional<std::string_view> authorization,
                     absl::Time deadline, const v1::GenerateRequest& request,
                     std::shared_ptr<EventSink> sink,
                     const std::function<void(GenerationRequest*)>& adjust = nullptr);

  // The client cancelled, left, or its deadline passed: forwarded to the engine once submitted.
  void Cancel() { link_.Cancel(); }
  // Gateway::FinalStatus of the engine's final event for this call.
  absl::Status FinalStatus(const FinalEvent& event) const;
  // RESOURCE_EXHAUSTED naming the size when `reply` exceeds server.max_send_message_bytes.
  absl::Status CheckReplySize(const google::protobuf::Message& reply) const;
  // Counts and logs the call with the status its client gets; `event` is null when it never
  // ran. Only the first call counts.
  void Record(const absl::Status& status, const FinalEvent* event);
  // The transport is done with the call: its last reply has left. Idempotent.
  void Close();

 private:
  Gateway* const gateway_;
  const char* const method_;
  const char* const protocol_;
  const absl::Time start_;
  std::string request_id_;
  bool identified_ = false;
  Engine* engine_ = nullptr;
  std::atomic<bool> opened_{false};  // counted by Gateway::CallOpened, until Close
  std::atomic<bool> recorded_{false};
  EngineRequestLink link_;
};

}  // namespace dllm

#endif  // DLLM_SERVER_GATEWAY_CALL_H_
