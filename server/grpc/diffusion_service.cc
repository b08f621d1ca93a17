#include "server/grpc/diffusion_service.h"

#include <chrono>
#include <deque>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "engine/engine.h"
#include "server/gateway_call.h"
#include "server/grpc/reactor_order.h"
#include "server/grpc/status_mapping.h"
#include "server/refusal_status.h"
#include "server/request_decoding.h"
#include "server/response_mapping.h"

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
// A load refusal's RetryAfter goes out as gRPC's server pushback (the trailer that gRPC's
// retry policy honours), in milliseconds.
absl::Status CountedRefusal(grpc::CallbackServerContext* context, const grpc::ByteBuffer& raw,
                            const absl::Status& refusal) {
  if (std::optional<absl::Duration> wait = RetryAfter(refusal); wait.has_value()) {
    context->AddTrailingMetadata("grpc-retry-pushback-ms",
                                 absl::StrCat(absl::ToInt64Milliseconds(*wait)));
  }
  return RefusalStatus(absl::Now(), CallDeadline(context), context->IsCancelled(), raw.Valid(),
                       refusal);
}

// CheckReplySize (the gateway's or its call's), then serializes `reply` into `out`.
template <typename Checker>
absl::Status SerializeReply(const Checker& checker, const google::protobuf::Message& reply,
                            grpc::ByteBuffer* out) {
  if (absl::Status st = checker.CheckReplySize(reply); !st.ok()) return st;
  bool own_buffer = false;
  const grpc::Status st =
      grpc::GenericSerialize<grpc::ProtoBufferWriter, google::protobuf::Message>(reply, out,
                                                                                 &own_buffer);
  if (!st.ok()) return absl::InternalError(absl::StrCat("reply: ", st.error_message()));
  return absl::OkStatus();
}

// ---------------------------------------------------------------- unary Generate

class GenerateCall final : public grpc::ServerUnaryReactor, public EventSink {
 public:
  static GenerateCall* Start(Gateway* gateway, grpc::CallbackServerContext* context,
                             const grpc::ByteBuffer* raw, grpc::ByteBuffer* response) {
    auto call = std::shared_ptr<GenerateCall>(new GenerateCall(gateway, response));
    call->self_ = call;
    v1::GenerateRequest request;
    absl::Status status = DecodeRequest(*raw, &request);
    call->call_.Identify(request);
    if (status.ok()) {
      status = call->call_.Start(Gateway::TokenCheck::kCheck, AuthorizationHeader(context),
                                 CallDeadline(context), request, call);
    }
    if (!status.ok()) call->FinishCall(CountedRefusal(context, *raw, status), nullptr);
    return call.get();
  }

  void OnCommit(const CommitEvent&) override {}

  void OnFinal(const FinalEvent& event) override {
    absl::Status status = call_.FinalStatus(event);
    if (status.ok()) {
      v1::GenerateResponse reply;
      FillGenerateResponse(call_.request_id(), event, &reply);
      status = SerializeReply(call_, reply, response_);
    }
    FinishCall(status, &event);
  }

  void OnCancel() override {
    call_.Cancel();
    ReactionEnded(this);
  }

  void OnDone() override {
    OnDoneStarted(this);
    call_.Close();
    self_.reset();
  }

 private:
  GenerateCall(Gateway* gateway, grpc::ByteBuffer* response)
      : call_(gateway, "Generate", "grpc"), response_(response) {}

  void FinishCall(const absl::Status& status, const FinalEvent* event) {
    call_.Record(status, event);
    ReactionEnded(this);
    Finish(ToGrpcStatus(status));  // may run OnDone on another thread: touch nothing afterwards
  }

  GatewayCall call_;
  grpc::ByteBuffer* const response_;
  std::shared_ptr<GenerateCall> self_;  // keeps the reactor alive until OnDone
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
    absl::Status status = DecodeRequest(*raw, &request);
    call->call_.Identify(request);
    if (status.ok()) {
      status = call->call_.Start(Gateway::TokenCheck::kCheck, AuthorizationHeader(context),
                                 CallDeadline(context), request, call);
    }
    if (!status.ok()) call->FinishWithoutEngine(CountedRefusal(context, *raw, status));
    return call.get();
  }

  void OnCommit(const CommitEvent& event) override {
    v1::GenerateStreamResponse message;
    message.set_request_id(call_.request_id());
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
    if (cancel) call_.Cancel();
    Pump();
  }

  void OnSnapshot(const SnapshotEvent& event) override {
    v1::GenerateStreamResponse message;
    message.set_request_id(call_.request_id());
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
    absl::Status status = call_.FinalStatus(event);
    const bool send_summary = status.ok() || event.reason == FinishReason::kCancelled ||
                              event.reason == FinishReason::kDeadline;
    {
      absl::MutexLock lock(&mu_);
      if (!oversized_.ok()) status = oversized_;
      if (send_summary && !write_failed_) {
        v1::GenerateStreamResponse message;
        message.set_request_id(call_.request_id());
        FillGenerateResponse(call_.request_id(), event, message.mutable_final());
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
    call_.Record(status, &event);
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
    call_.Cancel();
    ReactionEnded(this);
  }

  void OnDone() override {
    OnDoneStarted(this);
    call_.Close();
    self_.reset();
  }

 private:
  static constexpr size_t kMaxQueuedForSnapshot = 16;
  struct Pending {
    v1::GenerateStreamResponse message;
    bool snapshot;
  };

  explicit GenerateStreamCall(Gateway* gateway) : call_(gateway, "GenerateStream", "grpc") {}

  absl::Status Oversized(const v1::GenerateStreamResponse& message) const {
    return call_.CheckReplySize(message);
  }

  void FinishWithoutEngine(const absl::Status& status) {
    call_.Record(status, nullptr);
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

  GatewayCall call_;
  std::shared_ptr<GenerateStreamCall> self_;
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
  absl::StatusOr<v1::TokenizeResponse> response = gateway_->Tokenize(engine, request);
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
