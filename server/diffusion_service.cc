#include "server/diffusion_service.h"

#include <chrono>
#include <deque>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "engine/tokenizer/tokenizer.h"
#include "server/engine_request_link.h"
#include "server/reactor_order.h"
#include "server/refusal_status.h"
#include "server/request_decoding.h"
#include "server/response_mapping.h"
#include "server/status_mapping.h"

namespace dllm {
namespace {

constexpr char kAuthorizationKey[] = "authorization";

std::optional<std::string_view> AuthorizationHeader(grpc::CallbackServerContext* context) {
  const auto& metadata = context->client_metadata();
  auto it = metadata.find(kAuthorizationKey);
  if (it == metadata.end()) return std::nullopt;
  return std::string_view(it->second.data(), it->second.size());
}

// gRPC reports "no deadline" as a time point far in the future.
absl::Time CallDeadline(grpc::CallbackServerContext* context) {
  const auto deadline = context->deadline();
  const absl::Time now = absl::Now();
  if (deadline >= std::chrono::system_clock::now() + std::chrono::hours(24 * 365)) {
    return absl::InfiniteFuture();
  }
  const absl::Time t = absl::FromChrono(deadline);
  return t < now - absl::Hours(24 * 365) ? absl::InfiniteFuture() : t;
}

// The bytes of a raw request message (gRPC may hand them over in several slices).
absl::StatusOr<std::string> BufferBytes(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  if (!buffer.Dump(&slices).ok()) return absl::InvalidArgumentError("request: unreadable bytes");
  std::string bytes;
  bytes.reserve(buffer.Length());
  for (const grpc::Slice& slice : slices) {
    bytes.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
  }
  return bytes;
}

absl::Status DecodeRequest(const grpc::ByteBuffer& buffer, google::protobuf::Message* out) {
  // No payload at all (not an empty message, which is a valid buffer of zero bytes).
  if (!buffer.Valid()) return absl::InvalidArgumentError("request: the call carried no message");
  absl::StatusOr<std::string> bytes = BufferBytes(buffer);
  if (!bytes.ok()) return bytes.status();
  return ParseRequestBytes(*bytes, out);
}

// The status a refused call is counted with (see refusal_status.h); `raw` is its request.
grpc::Status CountedRefusal(grpc::CallbackServerContext* context, const grpc::ByteBuffer& raw,
                            const absl::Status& refusal) {
  return ToGrpcStatus(RefusalStatus(absl::Now(), CallDeadline(context), context->IsCancelled(),
                                    raw.Valid(), refusal));
}

// ---------------------------------------------------------------- unary Generate

class GenerateCall final : public grpc::ServerUnaryReactor, public EventSink {
 public:
  static GenerateCall* Start(DiffusionService* service, grpc::CallbackServerContext* context,
                             const grpc::ByteBuffer* raw, grpc::ByteBuffer* response) {
    auto call = std::shared_ptr<GenerateCall>(new GenerateCall(service, response));
    call->self_ = call;
    v1::GenerateRequest request;
    const absl::Status decoded = DecodeRequest(*raw, &request);
    const std::string log_id = service->LogId(request);
    if (!decoded.ok()) {
      call->FinishCall(CountedRefusal(context, *raw, decoded), nullptr, log_id);
      return call.get();
    }
    absl::StatusOr<DiffusionService::Admitted> admitted = service->Admit(context, request, log_id);
    if (!admitted.ok()) {
      call->FinishCall(CountedRefusal(context, *raw, admitted.status()), nullptr, log_id);
      return call.get();
    }
    call->request_id_ = admitted->request.id;
    Engine* engine = admitted->engine;
    const absl::Time deadline = admitted->request.deadline;
    service->CallOpened();
    call->opened_ = true;
    absl::StatusOr<RequestId> id = engine->Submit(std::move(admitted->request), call);
    if (!id.ok()) {
      call->FinishCall(ToGrpcStatus(id.status()), nullptr, call->request_id_);
      return call.get();
    }
    call->link_.Bind(engine, *id, deadline);
    return call.get();
  }

  void OnCommit(const CommitEvent&) override {}

  void OnFinal(const FinalEvent& event) override {
    grpc::Status status = service_->FinalStatus(event, link_);
    if (status.ok()) {
      v1::GenerateResponse reply;
      FillGenerateResponse(request_id_, event, &reply);
      status = service_->SerializeReply(reply, response_);
    }
    FinishCall(status, &event, request_id_);
  }

  void OnCancel() override {
    link_.Cancel();
    ReactionEnded(this);
  }

  void OnDone() override {
    OnDoneStarted(this);
    if (opened_) service_->CallClosed();
    self_.reset();
  }

 private:
  GenerateCall(DiffusionService* service, grpc::ByteBuffer* response)
      : service_(service), response_(response), start_(absl::Now()) {}

  void FinishCall(const grpc::Status& status, const FinalEvent* event, const std::string& id) {
    service_->RecordCall("Generate", id, status, event, start_);
    ReactionEnded(this);
    Finish(status);  // may run OnDone on another thread: touch nothing afterwards
  }

  DiffusionService* const service_;
  grpc::ByteBuffer* const response_;
  const absl::Time start_;
  std::string request_id_;
  std::shared_ptr<GenerateCall> self_;  // keeps the reactor alive until OnDone
  bool opened_ = false;                 // counted by CallOpened (set before Submit)
  EngineRequestLink link_;
};

// ---------------------------------------------------------------- streaming Generate

class GenerateStreamCall final : public grpc::ServerWriteReactor<grpc::ByteBuffer>,
                                 public EventSink {
 public:
  static GenerateStreamCall* Start(DiffusionService* service, grpc::CallbackServerContext* context,
                                   const grpc::ByteBuffer* raw) {
    auto call = std::shared_ptr<GenerateStreamCall>(new GenerateStreamCall(service));
    call->self_ = call;
    v1::GenerateRequest request;
    const absl::Status decoded = DecodeRequest(*raw, &request);
    const std::string log_id = service->LogId(request);
    if (!decoded.ok()) {
      call->FinishWithoutEngine(CountedRefusal(context, *raw, decoded), log_id);
      return call.get();
    }
    absl::StatusOr<DiffusionService::Admitted> admitted = service->Admit(context, request, log_id);
    if (!admitted.ok()) {
      call->FinishWithoutEngine(CountedRefusal(context, *raw, admitted.status()), log_id);
      return call.get();
    }
    call->request_id_ = admitted->request.id;
    Engine* engine = admitted->engine;
    const absl::Time deadline = admitted->request.deadline;
    service->CallOpened();
    call->opened_ = true;
    absl::StatusOr<RequestId> id = engine->Submit(std::move(admitted->request), call);
    if (!id.ok()) {
      call->FinishWithoutEngine(ToGrpcStatus(id.status()), call->request_id_);
      return call.get();
    }
    call->link_.Bind(engine, *id, deadline);
    return call.get();
  }

  void OnCommit(const CommitEvent& event) override {
    v1::GenerateStreamResponse message;
    message.set_request_id(request_id_);
    FillCommittedDelta(event, message.mutable_committed());
    bool cancel = false;
    {
      absl::MutexLock lock(&mu_);
      if (write_failed_) return;
      if (grpc::Status st = Oversized(message); !st.ok()) {
        // A committed delta that cannot be sent loses text for good: end the call with it.
        oversized_ = st;
        write_failed_ = true;
        pending_.clear();
        cancel = true;
      } else {
        pending_.push_back(Pending{std::move(message), false});
      }
    }
    if (cancel) link_.Cancel();
    Pump();
  }

  void OnSnapshot(const SnapshotEvent& event) override {
    v1::GenerateStreamResponse message;
    message.set_request_id(request_id_);
    FillCanvasSnapshot(event, message.mutable_canvas());
    {
      absl::MutexLock lock(&mu_);
      if (write_failed_) return;
      // Snapshots are provisional: keep only the newest one waiting, and only while the
      // client keeps up (fewer than kMaxQueuedForSnapshot messages waiting).
      for (auto it = pending_.begin(); it != pending_.end(); ++it) {
        if (it->snapshot) {
          pending_.erase(it);
          break;
        }
      }
      if (pending_.size() >= kMaxQueuedForSnapshot) return;
      if (!Oversized(message).ok()) return;  // provisional: dropping it loses nothing
      pending_.push_back(Pending{std::move(message), true});
    }
    Pump();
  }

  void OnFinal(const FinalEvent& event) override {
    grpc::Status status = service_->FinalStatus(event, link_);
    const bool send_summary = status.ok() || event.reason == FinishReason::kCancelled ||
                              event.reason == FinishReason::kDeadline;
    {
      absl::MutexLock lock(&mu_);
      if (!oversized_.ok()) status = oversized_;
      if (send_summary && !write_failed_) {
        v1::GenerateStreamResponse message;
        message.set_request_id(request_id_);
        FillGenerateResponse(request_id_, event, message.mutable_final());
        if (grpc::Status st = Oversized(message); !st.ok()) {
          if (status.ok()) status = st;
        } else {
          pending_.push_back(Pending{std::move(message), false});
        }
      }
    }
    // Recorded once the status is final (an oversized summary turns OK into
    // RESOURCE_EXHAUSTED, which is what the client gets) and before the call can finish, so
    // a client never sees a status the metrics do not have yet.
    service_->RecordCall("GenerateStream", request_id_, status, &event, start_);
    {
      absl::MutexLock lock(&mu_);
      final_status_ = status;
      final_ready_ = true;
    }
    Pump();  // Finish runs once every queued message is written
  }

  void OnWriteDone(bool ok) override {
    {
      absl::MutexLock lock(&mu_);
      writing_ = false;
      if (!ok) {
        write_failed_ = true;  // cancelled or broken: nothing more will reach the client
        pending_.clear();
      }
    }
    ReactionEnded(this);  // before Pump, which may Finish
    Pump();
  }

  void OnCancel() override {
    link_.Cancel();
    ReactionEnded(this);
  }

  void OnDone() override {
    OnDoneStarted(this);
    if (opened_) service_->CallClosed();
    self_.reset();
  }

 private:
  static constexpr size_t kMaxQueuedForSnapshot = 16;
  struct Pending {
    v1::GenerateStreamResponse message;
    bool snapshot;
  };

  explicit GenerateStreamCall(DiffusionService* service) : service_(service), start_(absl::Now()) {}

  grpc::Status Oversized(const v1::GenerateStreamResponse& message) const {
    return service_->CheckReplySize(message);
  }

  void FinishWithoutEngine(const grpc::Status& status, const std::string& id) {
    service_->RecordCall("GenerateStream", id, status, nullptr, start_);
    {
      absl::MutexLock lock(&mu_);
      final_status_ = status;
      final_ready_ = true;
    }
    Pump();
  }

  // Starts the next write, or finishes the call once the final event arrived and every
  // queued message went out. Decisions are taken under the lock, gRPC is called outside it.
  void Pump() {
    enum { kNothing, kWrite, kFinish } action = kNothing;
    grpc::Status status;
    {
      absl::MutexLock lock(&mu_);
      if (writing_ || finished_) return;
      if (!pending_.empty()) {
        current_ = std::move(pending_.front().message);
        pending_.pop_front();
        writing_ = true;
        action = kWrite;
      } else if (final_ready_) {
        finished_ = true;
        status = final_status_;
        action = kFinish;
      }
    }
    if (action == kWrite) {
      bool own_buffer = false;
      current_bytes_.Clear();
      (void)grpc::SerializationTraits<v1::GenerateStreamResponse>::Serialize(
          current_, &current_bytes_, &own_buffer);
      StartWrite(&current_bytes_);
    } else if (action == kFinish) {
      ReactionEnded(this);
      Finish(status);  // may run OnDone on another thread: touch nothing afterwards
    }
  }

  DiffusionService* const service_;
  const absl::Time start_;
  std::string request_id_;
  std::shared_ptr<GenerateStreamCall> self_;
  bool opened_ = false;                 // counted by CallOpened (set before Submit)
  v1::GenerateStreamResponse current_;  // the message being written
  grpc::ByteBuffer current_bytes_;      // its bytes (owned by us until OnWriteDone)

  absl::Mutex mu_;
  std::deque<Pending> pending_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool write_failed_ ABSL_GUARDED_BY(mu_) = false;
  bool final_ready_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  grpc::Status final_status_ ABSL_GUARDED_BY(mu_);
  grpc::Status oversized_ ABSL_GUARDED_BY(mu_);  // a message over max_send_message_bytes
  EngineRequestLink link_;
};

}  // namespace

DiffusionService::DiffusionService(const ServerConfig& config, const TokenAuthenticator* auth,
                                   ServerMetrics* metrics, Logger* logger)
    : config_(config),
      auth_(auth),
      metrics_(metrics),
      logger_(logger),
      limits_(config.limits),
      rejected_log_(kRejectedLogLinesPerSecond) {}

absl::Status DiffusionService::AttachEngine(Engine* engine) {
  RequestDefaults defaults =
      ResolveRequestDefaults(engine->model_info(), config_.decoding, config_.cache);
  v1::GenerateRequest probe;
  probe.set_prompt("x");
  absl::StatusOr<GenerationRequest> mapped =
      ToGenerationRequest(probe, defaults, config_.limits, engine->model_info());
  if (!mapped.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("the default request violates the configured limits (set the default in "
                     "the config's decoding:/cache: section or raise the limit): ",
                     mapped.status().message()));
  }
  absl::MutexLock lock(&mu_);
  engine_ = engine;
  defaults_ = defaults;
  limits_.max_prompt_bytes = EffectiveMaxPromptBytes(config_.limits, engine->model_info());
  return absl::OkStatus();
}

void DiffusionService::SetLameDuck() {
  absl::MutexLock lock(&mu_);
  lame_duck_ = true;
}

void DiffusionService::SetDraining() {
  absl::MutexLock lock(&mu_);
  draining_ = true;
}

DiffusionService::~DiffusionService() { WaitForOpenCalls(absl::Seconds(10)); }

void DiffusionService::CallOpened() {
  absl::MutexLock lock(&mu_);
  ++open_calls_;
}

void DiffusionService::CallClosed() {
  absl::MutexLock lock(&mu_);
  --open_calls_;
}

bool DiffusionService::WaitForOpenCalls(absl::Duration timeout) const {
  absl::MutexLock lock(&mu_);
  auto none = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return open_calls_ == 0; };
  return mu_.AwaitWithTimeout(absl::Condition(&none), timeout);
}

absl::Status DiffusionService::CheckAvailable(grpc::CallbackServerContext* context,
                                              Engine** engine) const {
  return CheckAvailable(AuthorizationHeader(context), engine);
}

bool DiffusionService::Serving() const {
  absl::MutexLock lock(&mu_);
  return engine_ != nullptr && !draining_ && !lame_duck_;
}

RequestDefaults DiffusionService::Defaults() const {
  absl::MutexLock lock(&mu_);
  return defaults_;
}

absl::Status DiffusionService::CheckAvailable(std::optional<std::string_view> authorization,
                                              Engine** engine) const {
  if (absl::Status st = auth_->Check(authorization); !st.ok()) return st;
  absl::MutexLock lock(&mu_);
  if (draining_) return absl::UnavailableError("server is shutting down");
  if (engine_ == nullptr) return absl::UnavailableError("model is loading");
  *engine = engine_;
  return absl::OkStatus();
}

std::string DiffusionService::LogId(const v1::GenerateRequest& request) {
  const std::string& id = request.request_id();
  bool usable = !id.empty() && id.size() <= 128;
  for (unsigned char c : id) usable &= (c >= 0x21 && c <= 0x7e);
  if (usable) return id;
  return absl::StrCat("req-", next_id_.fetch_add(1, std::memory_order_relaxed));
}

absl::StatusOr<DiffusionService::Admitted> DiffusionService::Admit(
    grpc::CallbackServerContext* context, const v1::GenerateRequest& request,
    const std::string& request_id) {
  return Admit(AuthorizationHeader(context), CallDeadline(context), request, request_id);
}

absl::StatusOr<DiffusionService::Admitted> DiffusionService::Admit(
    std::optional<std::string_view> authorization, absl::Time deadline,
    const v1::GenerateRequest& request, const std::string& request_id) {
  Admitted out;
  if (absl::Status st = CheckAvailable(authorization, &out.engine); !st.ok()) return st;
  RequestDefaults defaults;
  LimitsSection limits;
  {
    absl::MutexLock lock(&mu_);
    defaults = defaults_;
    limits = limits_;
  }
  absl::StatusOr<GenerationRequest> mapped =
      ToGenerationRequest(request, defaults, limits, out.engine->model_info());
  if (!mapped.ok()) return mapped.status();
  out.request = *std::move(mapped);
  // Tokenize here once so that the prompt-length limit can be checked before queueing;
  // the engine then uses the ids verbatim.
  if (out.request.prompt_ids.empty()) {
    absl::StatusOr<std::vector<int32_t>> ids = out.engine->TokenizeInput(out.request);
    if (!ids.ok()) return ids.status();
    if (absl::Status st = CheckPromptLength(ids->size(), config_.limits); !st.ok()) return st;
    out.request.prompt_ids = *std::move(ids);
    out.request.prompt_text.reset();
    out.request.messages.clear();
  }
  out.request.id = request_id;
  out.request.deadline = deadline;
  return out;
}

grpc::Status DiffusionService::FinalStatus(const FinalEvent& event,
                                           const EngineRequestLink& link) const {
  return ToGrpcStatus(FinalAbslStatus(event, link));
}

absl::Status DiffusionService::FinalAbslStatus(const FinalEvent& event,
                                               const EngineRequestLink& link) const {
  const bool client_cancelled = link.cancelled();
  if (event.reason == FinishReason::kCancelled && client_cancelled &&
      link.cancelled_by_deadline()) {
    return absl::DeadlineExceededError("deadline exceeded during generation");
  }
  if (event.reason == FinishReason::kCancelled && !client_cancelled) {
    absl::MutexLock lock(&mu_);
    if (draining_) {
      return absl::UnavailableError("server shut down before the request finished (drain timeout)");
    }
  }
  if (event.reason == FinishReason::kDeadline && event.status.ok()) {
    return absl::DeadlineExceededError("deadline exceeded during generation");
  }
  if (event.reason == FinishReason::kCancelled && event.status.ok()) {
    return absl::CancelledError("request cancelled");
  }
  return event.status;
}

grpc::Status DiffusionService::CheckReplySize(const google::protobuf::Message& reply) const {
  const size_t bytes = reply.ByteSizeLong();
  if (bytes > static_cast<size_t>(config_.server.max_send_message_bytes)) {
    return ToGrpcStatus(absl::ResourceExhaustedError(
        absl::StrCat("the reply is ", bytes, " bytes, over server.max_send_message_bytes (",
                     config_.server.max_send_message_bytes, ")")));
  }
  return grpc::Status::OK;
}

grpc::Status DiffusionService::SerializeReply(const google::protobuf::Message& reply,
                                              grpc::ByteBuffer* out) const {
  if (grpc::Status st = CheckReplySize(reply); !st.ok()) return st;
  bool own_buffer = false;
  return grpc::GenericSerialize<grpc::ProtoBufferWriter, google::protobuf::Message>(reply, out,
                                                                                    &own_buffer);
}

void DiffusionService::RecordCall(const char* method, const std::string& request_id,
                                  const grpc::Status& status, const FinalEvent* event,
                                  absl::Time start, const char* protocol) {
  const char* code = GrpcCodeName(status.error_code());
  if (metrics_ != nullptr) metrics_->CountRequest(code, protocol);
  // Calls rejected before they ran (queue full, bad token, bad field, draining) can come in
  // storms; their log lines are rate-limited (the metric above still counts every one).
  int64_t suppressed = 0;
  if (event == nullptr && !status.ok() && !rejected_log_.Admit(absl::Now(), &suppressed)) return;
  LogFields fields = {
      {"id", request_id},
      {"method", std::string(method)},
      {"protocol", std::string(protocol)},
      {"status", std::string(code)},
  };
  if (event != nullptr) {
    const SequenceStats& s = event->stats;
    fields.push_back({"finish_reason", std::string(FinishReasonName(event->reason))});
    fields.push_back({"prompt_tokens", int64_t{s.prompt_tokens}});
    fields.push_back({"generated_tokens", int64_t{s.generated_tokens}});
    fields.push_back({"steps", int64_t{s.steps}});
    fields.push_back({"full_steps", int64_t{s.full_steps}});
    fields.push_back({"refresh_ratio", s.RefreshRatio()});
    fields.push_back({"queue_ms", s.queue_seconds * 1e3});
  }
  fields.push_back({"latency_ms", absl::ToDoubleMilliseconds(absl::Now() - start)});
  if (!status.ok()) fields.push_back({"error", status.error_message()});
  if (suppressed > 0) fields.push_back({"similar_lines_suppressed", suppressed});
  logger_->Log(status.ok() ? LogLevel::kInfo : LogLevel::kWarning, "request_done", fields);
}

grpc::ServerUnaryReactor* DiffusionService::Generate(grpc::CallbackServerContext* context,
                                                     const grpc::ByteBuffer* request,
                                                     grpc::ByteBuffer* response) {
  return GenerateCall::Start(this, context, request, response);
}

grpc::ServerWriteReactor<grpc::ByteBuffer>* DiffusionService::GenerateStream(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request) {
  return GenerateStreamCall::Start(this, context, request);
}

grpc::ServerUnaryReactor* DiffusionService::Tokenize(grpc::CallbackServerContext* context,
                                                     const grpc::ByteBuffer* raw,
                                                     grpc::ByteBuffer* reply) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  Engine* engine = nullptr;
  if (absl::Status st = CheckAvailable(context, &engine); !st.ok()) {
    reactor->Finish(ToGrpcStatus(st));
    return reactor;
  }
  v1::TokenizeRequest request;
  if (absl::Status st = DecodeRequest(*raw, &request); !st.ok()) {
    reactor->Finish(ToGrpcStatus(st));
    return reactor;
  }
  LimitsSection limits;
  {
    absl::MutexLock lock(&mu_);
    limits = limits_;
  }
  // Bounded before tokenizing: a 4 MB prompt would otherwise be tokenized (and its ids,
  // bytes and rendering built) in full.
  absl::StatusOr<GenerationRequest> mapped = ToTokenizeRequest(request, limits);
  if (!mapped.ok()) {
    reactor->Finish(ToGrpcStatus(mapped.status()));
    return reactor;
  }
  absl::StatusOr<std::vector<int32_t>> ids = engine->TokenizeInput(*mapped);
  if (!ids.ok()) {
    reactor->Finish(ToGrpcStatus(ids.status()));
    return reactor;
  }
  const Tokenizer& tokenizer = engine->tokenizer();
  v1::TokenizeResponse response;
  response.mutable_token_ids()->Assign(ids->begin(), ids->end());
  for (int32_t id : *ids) response.add_token_bytes(tokenizer.TokenBytes(id));
  response.set_rendered(tokenizer.Decode(*ids, /*skip_special=*/false));
  reactor->Finish(SerializeReply(response, reply));
  return reactor;
}

grpc::ServerUnaryReactor* DiffusionService::GetModelInfo(grpc::CallbackServerContext* context,
                                                         const v1::GetModelInfoRequest* request,
                                                         v1::GetModelInfoResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  Engine* engine = nullptr;
  if (absl::Status st = CheckAvailable(context, &engine); !st.ok()) {
    reactor->Finish(ToGrpcStatus(st));
    return reactor;
  }
  FillModelInfo(engine, response);
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

absl::Status DiffusionService::DescribeModel(std::optional<std::string_view> authorization,
                                             v1::GetModelInfoResponse* out) const {
  Engine* engine = nullptr;
  if (absl::Status st = CheckAvailable(authorization, &engine); !st.ok()) return st;
  FillModelInfo(engine, out);
  return absl::OkStatus();
}

void DiffusionService::FillModelInfo(Engine* engine, v1::GetModelInfoResponse* out) const {
  RequestDefaults defaults;
  LimitsSection limits;
  {
    absl::MutexLock lock(&mu_);
    defaults = defaults_;
    limits = limits_;
  }
  dllm::FillModelInfo(engine->model_info(), config_.engine.backend, defaults, limits, out);
}

}  // namespace dllm
