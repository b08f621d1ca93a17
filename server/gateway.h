// Gateway: what every transport of dllm-server shares, with no transport in it.
//
// The gRPC service (grpc/diffusion_service.h) and the HTTP API (http/http_server.h) are thin
// layers over one Gateway: they turn their wire format into a v1::GenerateRequest plus the
// caller's authorization header and deadline, start one GatewayCall per generation
// (gateway_call.h: admission, submission, the open-call count, the reply-size check and the
// call record), and turn absl::Status into their own status codes. The Gateway does the rest,
// the same way for both:
//   - availability: UNAVAILABLE while the model loads (before AttachEngine) and once the
//     server drains (SetDraining); health reports NOT_SERVING from SetLameDuck on;
//   - auth: the bearer tokens (TokenAuthenticator);
//   - admission: request defaults, the configured limits (ValidateParams, through
//     request_mapping.h), tokenizing once and the prompt-length limit;
//   - the final status of an engine request (drain, deadline, cancellation);
//   - call records: dllm_requests_total{status,protocol} and one `request_done` log line per
//     generation call, accepted or refused (refusals' lines rate-limited);
//   - the open-call count that shutdown waits on.
//
// It includes no gRPC or HTTP header: the protobuf messages are the server's data model, not
// a transport.
//
// Lifecycle: construct, AttachEngine once the model is loaded, SetLameDuck then SetDraining
// at shutdown. The Gateway must outlive both transports (their calls hold a pointer to it)
// and the engine must outlive the Gateway's last call.
//
// Thread-safety: every method is safe from any thread.
#ifndef DLLM_SERVER_GATEWAY_H_
#define DLLM_SERVER_GATEWAY_H_

#include <atomic>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "dllm/v1/dllm.pb.h"
#include "engine/engine.h"
#include "server/auth.h"
#include "server/config.h"
#include "server/engine_request_link.h"
#include "server/log_rate_limiter.h"
#include "server/logger.h"
#include "server/metrics.h"

namespace dllm {

class Gateway {
 public:
  static constexpr int kRejectedLogLinesPerSecond = 20;

  // `auth` and `logger` are required; `metrics` may be null. None are owned; all must
  // outlive the gateway.
  Gateway(const ServerConfig& config, const TokenAuthenticator* auth, ServerMetrics* metrics,
          Logger* logger);
  // Waits (up to 10 s) for the open-call count to reach zero under the gateway's mutex: the
  // transports are stopped first, and this makes the order explicit (and visible to
  // ThreadSanitizer, which cannot see gRPC's own wait).
  ~Gateway();
  Gateway(const Gateway&) = delete;
  Gateway& operator=(const Gateway&) = delete;

  // Makes `engine` (not owned) serve calls; resolves the effective request defaults from its
  // ModelInfo and the configured defaults. FAILED_PRECONDITION (and the engine is not
  // attached) when the default request fails ValidateParams under the configured limits,
  // since every request that leaves the field unset would then fail.
  absl::Status AttachEngine(Engine* engine);
  // Lame duck: Serving() turns false (health checks report NOT_SERVING) while calls are still
  // accepted as before, until SetDraining.
  void SetLameDuck();
  // From now on new calls fail with UNAVAILABLE; requests the engine cancels because the
  // drain timed out end with UNAVAILABLE too (so clients know to retry elsewhere).
  void SetDraining();
  // What health checks report: engine attached, neither lame duck nor draining.
  bool Serving() const;

  // Authenticates and returns the engine; UNAUTHENTICATED, or UNAVAILABLE while the model
  // loads or the server drains. `authorization` is the authorization header's value (nullopt
  // when absent).
  absl::Status CheckAvailable(std::optional<std::string_view> authorization, Engine** engine) const;

  // Whether a call's token is still to be checked, or a check of the same call already passed
  // it (the HTTP API checks it before reading a body): the token is checked once per call.
  enum class TokenCheck { kCheck, kAlreadyChecked };

  // The id used in logs and responses: the caller's request_id when it is valid, else a
  // server-assigned "req-<n>" (so even refused calls are logged under a safe id).
  std::string LogId(const v1::GenerateRequest& request);
  // RESOURCE_EXHAUSTED naming the size when `reply` exceeds server.max_send_message_bytes.
  absl::Status CheckReplySize(const google::protobuf::Message& reply) const;

  // Waits until every call counted by CallOpened was closed; false on timeout. Used at
  // shutdown, after SetDraining and Engine::Drain, so the last replies leave before the
  // process does.
  bool WaitForOpenCalls(absl::Duration timeout) const;
  // Counts and logs one finished generation call with the status its client got. `event` is
  // null when it never ran. `protocol` is the metrics label: "grpc" or "http".
  void RecordCall(const char* method, const std::string& request_id, const absl::Status& status,
                  const FinalEvent* event, absl::Time start, const char* protocol);

  // Tokenize: the ids, their bytes and the rendering of a prompt or chat, with the engine a
  // CheckAvailable of the same call returned (auth runs once per call). INVALID_ARGUMENT for
  // input over limits.max_prompt_bytes (checked before tokenizing).
  absl::StatusOr<v1::TokenizeResponse> Tokenize(Engine* engine,
                                                const v1::TokenizeRequest& request) const;
  // GetModelInfo's answer: the model, the effective defaults and the limits. Fails like
  // CheckAvailable.
  absl::Status DescribeModel(std::optional<std::string_view> authorization,
                             v1::GetModelInfoResponse* out) const;

 private:
  // A generation call's steps are GatewayCall's (gateway_call.h), which owns the call.
  friend class GatewayCall;
  struct Admitted {
    Engine* engine = nullptr;
    GenerationRequest request;  // validated; prompt_ids set (tokenized here, once)
  };
  // Availability and auth, then the request mapped onto the defaults and validated, then
  // tokenized (so that the prompt-length limit is checked before queueing; the engine uses
  // the ids verbatim). `deadline` is the caller's (InfiniteFuture when none).
  absl::StatusOr<Admitted> Admit(TokenCheck token_check,
                                 std::optional<std::string_view> authorization, absl::Time deadline,
                                 const v1::GenerateRequest& request, const std::string& request_id);
  // UNAVAILABLE while the model loads or the server drains; else the engine.
  absl::Status Available(Engine** engine) const;
  // The status a generation ends with, from its engine final event: a cancellation that came
  // with the deadline is DEADLINE_EXCEEDED (EngineRequestLink::cancelled_by_deadline), one
  // caused by the drain timing out is UNAVAILABLE, the client's own is CANCELLED.
  absl::Status FinalStatus(const FinalEvent& event, const EngineRequestLink& link) const;
  // Bookkeeping for WaitForOpenCalls: a call that reached Submit, until its transport is
  // done with it.
  void CallOpened();
  void CallClosed();

  const ServerConfig config_;
  const TokenAuthenticator* const auth_;
  ServerMetrics* const metrics_;
  Logger* const logger_;
  std::atomic<uint64_t> next_id_{1};
  LogRateLimiter rejected_log_;

  mutable absl::Mutex mu_;
  Engine* engine_ ABSL_GUARDED_BY(mu_) = nullptr;
  RequestDefaults defaults_ ABSL_GUARDED_BY(mu_);
  LimitsSection limits_ ABSL_GUARDED_BY(mu_);  // config limits, max_prompt_bytes resolved
  bool draining_ ABSL_GUARDED_BY(mu_) = false;
  bool lame_duck_ ABSL_GUARDED_BY(mu_) = false;
  int open_calls_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace dllm

#endif  // DLLM_SERVER_GATEWAY_H_
