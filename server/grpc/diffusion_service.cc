#include "server/grpc/diffusion_service.h"

#include <chrono>
#include <deque>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "server/engine_request_link.h"
#include "server/grpc/reactor_order.h"
#include "server/refusal_status.h"
#include "server/request_decoding.h"
#include "server/response_mapping.h"
#include "server/grpc/status_mapping.h"

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
absl::Status CountedRefusal(grpc::CallbackServerContext* context, const grpc::ByteBuffer& raw,
                            const absl::Status& refusal) {
  return RefusalStatus(absl::Now(), CallDeadline(context), context->IsCancelled(), raw.Valid(),
                       refusal);
}

// CheckReplySize, then serializes `reply` into `out`.
absl::Status SerializeReply(const Gateway& gateway, const google::protobuf::Message& reply,
                            grpc::ByteBuffer* out) {
  if (absl::Status st = gateway.CheckReplySize(reply); !st.ok()) return st;
  bool own_buffer = false;
  const grpc::Status st =
      grpc::GenericSerialize<grpc::ProtoBufferWriter, google::protobuf::Message>(reply, out,
                                                                                 &own_buffer);
  if (!st.ok()) return absl::InternalError(absl::StrCat("reply: ", st.error_message()));
  return absl::OkStatus();
}

absl::StatusOr<Gateway::Admitted> Admit(Gateway* gateway, grpc::CallbackServerContext* context,
                                        const v1::GenerateRequest& request,
                                        const std::string& request_id) {
  return gateway->Admit(AuthorizationHeader(context), CallDeadline(context), request, request_id);
}

// ---------------------------------------------------------------- unary Generate

class GenerateCall final : public grpc::ServerUnaryReactor, public EventSink {
 public:
  static GenerateCall* Start(Gateway* gateway, grpc::CallbackServerContext* context,
                             const grpc::ByteBuffer* raw, grpc::ByteBuffer* response) {
    auto call = std::shared_ptr<GenerateCall>(new GenerateCall(gateway, response));
    call->self_ = call;
    v1::GenerateRequest request;
    const absl::Status decoded = DecodeRequest(*raw, &request);
    const std::string log_id = gateway->LogId(request);
    if (!decoded.ok()) {
      call->FinishCall(CountedRefusal(context, *raw, decoded), nullptr, log_id);
      return call.get();
    }
    absl::StatusOr<Gateway::Admitted> admitted = Admit(gateway, context, request, log_id);
    if (!admitted.ok()) {
      call->FinishCall(CountedRefusal(context, *raw, admitted.status()), nullptr, log_id);
      return call.get();
    }
    call->request_id_ = admitted->request.id;
    Engine* engine = admitted->engine;
    const absl::Time deadline = admitted->request.deadline;
    gateway->CallOpened();
    call->opened_ = true;
    absl::StatusOr<RequestId> id = engine->Submit(std::move(admitted->request), call);
    if (!id.ok()) {
      call->FinishCall(id.status(), nullptr, call->request_id_);
      return call.get();
    }
    call->link_.Bind(engine, *id, deadline);
    return call.get();
  }

  void OnCommit(const CommitEvent&) override {}

  void OnFinal(const FinalEvent& event) override {
    absl::Status status = gateway_->FinalStatus(event, link_);
    if (status.ok()) {
      v1::GenerateResponse reply;
      FillGenerateResponse(request_id_, event, &reply);
      status = SerializeReply(*gateway_, reply, response_);
    }
    FinishCall(status, &event, request_id_);
  }

  void OnCancel() override {
    link_.Cancel();
    ReactionEnded(this);
  }

  void OnDone() override {
    OnDoneStarted(this);
    if (opened_) gateway_->CallClosed();
    self_.reset();
  }

 private:
  GenerateCall(Gateway* gateway, grpc::ByteBuffer* response)
      : gateway_(gateway), response_(response), start_(absl::Now()) {}

  void FinishCall(const absl::Status& status, const FinalEvent* event, const std::string& id) {
    gateway_->RecordCall("Generate", id, status, event, start_, "grpc");
    ReactionEnded(this);
    Finish(ToGrpcStatus(status));  // may run OnDone on another thread: touch nothing afterwards
  }

  Gateway* const gateway_;
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
  static GenerateStreamCall* Start(Gateway* gateway, grpc::CallbackServerContext* context,
                                   const grpc::ByteBuffer* raw) {
    auto call = std::shared_ptr<GenerateStreamCall>(new GenerateStreamCall(gateway));
    call->self_ = call;
    v1::GenerateRequest request;
    const absl::Status decoded = DecodeRequest(*raw, &request);
    const std::string log_id = gateway->LogId(request);
    if (!decoded.ok()) {
      call->FinishWithoutEngine(CountedRefusal(context, *raw, decoded), log_id);
      return call.get();
    }
    absl::StatusOr<Gateway::Admitted> admitted = Admit(gateway, context, request, log_id);
    if (!admitted.ok()) {
      call->FinishWithoutEngine(CountedRefusal(context, *raw, admitted.status()), log_id);
      return call.get();
    }
    call->request_id_ = admitted->request.id;
    Engine* engine = admitted->engine;
    const absl::Time deadline = admitted->request.deadline;
    gateway->CallOpened();
    call->opened_ = true;
    absl::StatusOr<RequestId> id = engine->Submit(std::move(admitted->request), call);
    if (!id.ok()) {
      call->FinishWithoutEngine(id.status(), call->request_id_);
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
      if (absl::Status st = Oversized(message); !st.ok()) {
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
    absl::Status status = gateway_->FinalStatus(event, link_);
    const bool send_summary = status.ok() || event.reason == FinishReason::kCancelled ||
                              event.reason == FinishReason::kDeadline;
    {
      absl::MutexLock lock(&mu_);
      if (!oversized_.ok()) status = oversized_;
      if (send_summary && !write_failed_) {
        v1::GenerateStreamResponse message;
        message.set_request_id(request_id_);
        FillGenerateResponse(request_id_, event, message.mutable_final());
        if (absl::Status st = Oversized(message); !st.ok()) {
          if (status.ok()) status = st;
        } else {
          pending_.push_back(Pending{std::move(message), false});
        }
      }
    }
    // Recorded once the status is final (an oversized summary turns OK into
    // RESOURCE_EXHAUSTED, which is what the client gets) and before the call can finish, so
    // a client never sees a status the metrics do not have yet.
    gateway_->RecordCall("GenerateStream", request_id_, status, &event, start_, "grpc");
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
    if (opened_) gateway_->CallClosed();
    self_.reset();
  }

 private:
  static constexpr size_t kMaxQueuedForSnapshot = 16;
  struct Pending {
    v1::GenerateStreamResponse message;
    bool snapshot;
  };

  explicit GenerateStreamCall(Gateway* gateway) : gateway_(gateway), start_(absl::Now()) {}

  absl::Status Oversized(const v1::GenerateStreamResponse& message) const {
    return gateway_->CheckReplySize(message);
  }

  void FinishWithoutEngine(const absl::Status& status, const std::string& id) {
    gateway_->RecordCall("GenerateStream", id, status, nullptr, start_, "grpc");
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
    absl::Status status;
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
      Finish(ToGrpcStatus(status));  // may run OnDone: touch nothing afterwards
    }
  }

  Gateway* const gateway_;
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
  absl::Status final_status_ ABSL_GUARDED_BY(mu_);
  absl::Status oversized_ ABSL_GUARDED_BY(mu_);  // a message over max_send_message_bytes
  EngineRequestLink link_;
};

}  // namespace

DiffusionService::DiffusionService(Gateway* gateway) : gateway_(gateway) {}

grpc::ServerUnaryReactor* DiffusionService::Generate(grpc::CallbackServerContext* context,
                                                     const grpc::ByteBuffer* request,
                                                     grpc::ByteBuffer* response) {
  return GenerateCall::Start(gateway_, context, request, response);
}

grpc::ServerWriteReactor<grpc::ByteBuffer>* DiffusionService::GenerateStream(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request) {
  return GenerateStreamCall::Start(gateway_, context, request);
}

grpc::ServerUnaryReactor* DiffusionService::Tokenize(grpc::CallbackServerContext* context,
                                                     const grpc::ByteBuffer* raw,
                                                     grpc::ByteBuffer* reply) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  // Availability and auth before the bytes are even looked at.
  Engine* engine = nullptr;
  if (absl::Status st = gateway_->CheckAvailable(AuthorizationHeader(context), &engine); !st.ok()) {
    reactor->Finish(ToGrpcStatus(st));
    return reactor;
  }
  v1::TokenizeRequest request;
  if (absl::Status st = DecodeRequest(*raw, &request); !st.ok()) {
    reactor->Finish(ToGrpcStatus(st));
    return reactor;
  }
  absl::StatusOr<v1::TokenizeResponse> response =
      gateway_->Tokenize(AuthorizationHeader(context), request);
  reactor->Finish(ToGrpcStatus(response.ok() ? SerializeReply(*gateway_, *response, reply)
                                             : response.status()));
  return reactor;
}

grpc::ServerUnaryReactor* DiffusionService::GetModelInfo(grpc::CallbackServerContext* context,
                                                         const v1::GetModelInfoRequest* request,
                                                         v1::GetModelInfoResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(ToGrpcStatus(gateway_->DescribeModel(AuthorizationHeader(context), response)));
  return reactor;
}

}  // namespace dllm
