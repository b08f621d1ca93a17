// DiffusionService: the gRPC callback implementation of dllm.v1.DiffusionLM.
//
// gRPC threads only authenticate, validate, tokenize and enqueue; the engine worker drives
// each call through its EventSink, and responses are written without blocking the worker
// (provisional canvas snapshots are dropped when a client reads slowly; committed deltas
// and the final summary never are). Client cancellation and the call's deadline reach the
// engine (Engine::Cancel, GenerationRequest::deadline). Every generation call, accepted or
// rejected, is counted in dllm_requests_total{status,protocol="grpc"} and logged as one
// `request_done` line. The HTTP API (http_server.h) uses Admit/FinalAbslStatus/RecordCall too.
//
// Generate, GenerateStream and Tokenize take their requests as raw bytes and parse them
// with ParseRequestBytes (server/request_decoding.h), so that a string field holding invalid
// UTF-8 is INVALID_ARGUMENT naming the field, logged and counted, instead of a parse failure
// inside gRPC. Replies are serialized here too: one larger than
// server.max_send_message_bytes ends the call with RESOURCE_EXHAUSTED (logged and counted as
// such, which is what the client gets). Rejected calls are logged at most
// kRejectedLogLinesPerSecond times a second (metrics count every one).
//
// Lifecycle: calls fail with UNAVAILABLE until AttachEngine (model loading / warm-up) and
// again after SetDraining (shutdown). The engine must outlive the gRPC server.
//
// Thread-safety: all methods are safe from any thread.
#ifndef DLLM_SERVER_DIFFUSION_SERVICE_H_
#define DLLM_SERVER_DIFFUSION_SERVICE_H_

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "absl/synchronization/mutex.h"
#include "dllm/v1/dllm.grpc.pb.h"
#include "engine/engine.h"
#include "server/auth.h"
#include "server/config.h"
#include "server/engine_request_link.h"
#include "server/log_rate_limiter.h"
#include "server/logger.h"
#include "server/metrics.h"
#include "server/request_mapping.h"

namespace dllm {

// The typed callback service with the three request-carrying methods switched to raw bytes.
using DiffusionServiceBase = v1::DiffusionLM::WithRawCallbackMethod_Generate<
    v1::DiffusionLM::WithRawCallbackMethod_GenerateStream<
        v1::DiffusionLM::WithRawCallbackMethod_Tokenize<v1::DiffusionLM::CallbackService>>>;

class DiffusionService final : public DiffusionServiceBase {
 public:
  static constexpr int kRejectedLogLinesPerSecond = 20;

  // `auth` and `logger` are required; `metrics` may be null. None are owned; all must
  // outlive the service.
  DiffusionService(const ServerConfig& config, const TokenAuthenticator* auth,
                   ServerMetrics* metrics, Logger* logger);
  // Destroy the grpc::Server first: its Shutdown waits for every call's OnDone. The destructor
  // then still waits (up to 10 s) for the open-call count to reach zero under the service's
  // mutex, which makes that order explicit (and visible to ThreadSanitizer, which cannot see
  // gRPC's own wait).
  ~DiffusionService() override;

  // Makes `engine` (not owned) serve calls; resolves the effective request defaults from
  // its ModelInfo and the configured defaults. FAILED_PRECONDITION (and the engine is not
  // attached) when those defaults violate the configured limits, since every request that
  // leaves the field unset would then fail.
  absl::Status AttachEngine(Engine* engine);
  // Lame duck: Serving() turns false (health checks report NOT_SERVING) while calls are
  // still accepted as before, until SetDraining.
  void SetLameDuck();
  // From now on new calls fail with UNAVAILABLE; requests the engine cancels because the
  // drain timed out end with UNAVAILABLE too (so clients know to retry elsewhere).
  void SetDraining();
  // Waits until every generation call that reached the engine has been completed by gRPC
  // (its reply and status handed to the transport); false on timeout. Used at shutdown,
  // after SetDraining and Engine::Drain, so the last replies leave before the process does.
  bool WaitForOpenCalls(absl::Duration timeout) const;

  // The typed overloads stay unused (the raw handlers replace them).
  using DiffusionServiceBase::Generate;
  using DiffusionServiceBase::GenerateStream;
  using DiffusionServiceBase::Tokenize;
  grpc::ServerUnaryReactor* Generate(grpc::CallbackServerContext* context,
                                     const grpc::ByteBuffer* request,
                                     grpc::ByteBuffer* response) override;
  grpc::ServerWriteReactor<grpc::ByteBuffer>* GenerateStream(
      grpc::CallbackServerContext* context, const grpc::ByteBuffer* request) override;
  grpc::ServerUnaryReactor* Tokenize(grpc::CallbackServerContext* context,
                                     const grpc::ByteBuffer* request,
                                     grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* GetModelInfo(grpc::CallbackServerContext* context,
                                         const v1::GetModelInfoRequest* request,
                                         v1::GetModelInfoResponse* response) override;

  // Shared by the per-call reactors (implementation detail, public for them).
  struct Admitted {
    Engine* engine = nullptr;
    GenerationRequest request;
  };
  // The id used in logs and responses: the caller's request_id when it is valid, else a
  // server-assigned "req-<n>" (so even rejected calls are logged under a safe id).
  std::string LogId(const v1::GenerateRequest& request);
  absl::StatusOr<Admitted> Admit(grpc::CallbackServerContext* context,
                                 const v1::GenerateRequest& request, const std::string& request_id);
  // The transport-neutral form (used by the HTTP API): `authorization` is the value of the
  // authorization header (nullopt when absent), `deadline` the request's deadline.
  absl::StatusOr<Admitted> Admit(std::optional<std::string_view> authorization, absl::Time deadline,
                                 const v1::GenerateRequest& request, const std::string& request_id);
  // Final gRPC status for an engine final event (see SetDraining); a cancellation that came
  // with the deadline is DEADLINE_EXCEEDED (EngineRequestLink::cancelled_by_deadline).
  grpc::Status FinalStatus(const FinalEvent& event, const EngineRequestLink& link) const;
  absl::Status FinalAbslStatus(const FinalEvent& event, const EngineRequestLink& link) const;
  // RESOURCE_EXHAUSTED naming the size when `reply` exceeds server.max_send_message_bytes.
  grpc::Status CheckReplySize(const google::protobuf::Message& reply) const;
  // CheckReplySize, then serializes `reply` into `out`.
  grpc::Status SerializeReply(const google::protobuf::Message& reply, grpc::ByteBuffer* out) const;
  // Bookkeeping for WaitForOpenCalls (a call that reached Submit, until its OnDone).
  void CallOpened();
  void CallClosed();
  // Counts and logs one finished generation call. `event` is null when it never ran.
  // `protocol` is the metrics label: "grpc" or "http".
  void RecordCall(const char* method, const std::string& request_id, const grpc::Status& status,
                  const FinalEvent* event, absl::Time start, const char* protocol = "grpc");

  // Authenticates and returns the engine; UNAUTHENTICATED, or UNAVAILABLE while the model
  // loads or the server drains.
  absl::Status CheckAvailable(std::optional<std::string_view> authorization, Engine** engine) const;
  // GetModelInfo's answer, transport-neutral (the HTTP API's GET /v1/dllm/model_info):
  // the model, the effective defaults and the limits. Fails like CheckAvailable.
  absl::Status DescribeModel(std::optional<std::string_view> authorization,
                             v1::GetModelInfoResponse* out) const;
  // What health checks report: engine attached, neither lame duck nor draining.
  bool Serving() const;
  // The effective request defaults (valid once AttachEngine succeeded).
  RequestDefaults Defaults() const;
  const ServerConfig& config() const { return config_; }

 private:
  absl::Status CheckAvailable(grpc::CallbackServerContext* context, Engine** engine) const;
  void FillModelInfo(Engine* engine, v1::GetModelInfoResponse* out) const;

  const ServerConfig config_;
  const TokenAuthenticator* const auth_;
  ServerMetrics* const metrics_;
  Logger* const logger_;
  std::atomic<uint64_t> next_id_{1};
  LimitsSection limits_ ABSL_GUARDED_BY(mu_);  // config limits, max_prompt_bytes resolved
  LogRateLimiter rejected_log_;

  mutable absl::Mutex mu_;
  Engine* engine_ ABSL_GUARDED_BY(mu_) = nullptr;
  RequestDefaults defaults_ ABSL_GUARDED_BY(mu_);
  bool draining_ ABSL_GUARDED_BY(mu_) = false;
  bool lame_duck_ ABSL_GUARDED_BY(mu_) = false;
  int open_calls_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace dllm

#endif  // DLLM_SERVER_DIFFUSION_SERVICE_H_
