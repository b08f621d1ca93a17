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
#include "server/grpc/choice_calls.h"
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

// Waits for every choice's final event, then answers once: with one choice, its response (or
// its error); with n > 1, GenerateResponse.choices.
class GenerateCall final : public grpc::ServerUnaryReactor, public ChoiceEvents {
 public:
  static GenerateCall* Start(Gateway* gateway, grpc::CallbackServerContext* context,
                             const grpc::ByteBuffer* raw, grpc::ByteBuffer* response) {
    auto call = std::shared_ptr<GenerateCall>(new GenerateCall(gateway, response));
    call->self_ = call;
    v1::GenerateRequest request;
    absl::Status status = DecodeRequest(*raw, &request);
    call->choices_.Identify(request);
    {
      absl::MutexLock lock(&call->mu_);
      call->outcomes_.resize(static_cast<size_t>(call->choices_.size()));
    }
    int started = 0;
    if (status.ok()) {
      status = call->choices_.Start(Gateway::TokenCheck::kCheck, AuthorizationHeader(context),
                                    CallDeadline(context), request, call, &started);
    }
    if (!status.ok()) status = CountedRefusal(context, *raw, status);
    bool complete = false;
    {
      absl::MutexLock lock(&call->mu_);
      call->refusal_ = status;
      call->refused_index_ = started;
      call->expected_finals_ = status.ok() ? call->choices_.size() : started;
      complete = call->finals_ == call->expected_finals_;
    }
    if (complete) call->Complete();
    return call.get();
  }

  void OnChoiceCommit(int, const CommitEvent&) override {}
  void OnChoiceSnapshot(int, const SnapshotEvent&) override {}

  void OnChoiceFinal(int index, const FinalEvent& event) override {
    const absl::Status status = choices_.call(index).FinalStatus(event);
    bool complete = false;
    {
      absl::MutexLock lock(&mu_);
      outcomes_[static_cast<size_t>(index)] = Outcome{status, event};
      ++finals_;
      complete = finals_ == expected_finals_;
    }
    if (complete) Complete();
  }

  void OnCancel() override {
    choices_.Cancel();
    ReactionEnded(this);
  }

  void OnDone() override {
    OnDoneStarted(this);
    choices_.Close();
    self_.reset();
  }

 private:
  struct Outcome {
    absl::Status status;
    std::optional<FinalEvent> event;  // absent for a choice never started
  };

  GenerateCall(Gateway* gateway, grpc::ByteBuffer* response)
      : choices_(gateway, "Generate", "grpc"), response_(response) {}

  // Every final event expected has arrived (once, on whichever thread brought the last one),
  // so the outcomes are taken, not copied: nothing writes them again.
  void Complete() {
    std::vector<Outcome> outcomes;
    absl::Status refusal;
    int refused_index = 0;
    {
      absl::MutexLock lock(&mu_);
      outcomes = std::move(outcomes_);
      refusal = refusal_;
      refused_index = refused_index_;
    }
    if (!refusal.ok()) {
      // A refused choice fails the call; the ones started before it were cancelled.
      for (int i = 0; i < refused_index; ++i) {
        choices_.call(i).Record(outcomes[i].status, &*outcomes[i].event);
      }
      choices_.call(refused_index).Record(refusal, nullptr);
      FinishCall(refusal);
      return;
    }
    v1::GenerateResponse reply;
    std::vector<absl::Status> statuses;
    statuses.reserve(outcomes.size());
    for (const Outcome& o : outcomes) statuses.push_back(o.status);
    absl::Status status = CallStatus(statuses);
    if (choices_.size() == 1) {
      if (status.ok()) FillGenerateResponse(choices_.request_id(), *outcomes[0].event, &reply);
    } else {
      reply.set_request_id(choices_.request_id());
      for (int i = 0; i < choices_.size(); ++i) {
        v1::GenerateResponse* choice = reply.add_choices();
        if (!outcomes[i].status.ok()) {
          FillChoiceError(choices_.request_id(), i, outcomes[i].status, choice);
          continue;
        }
        FillGenerateResponse(choices_.request_id(), *outcomes[i].event, choice);
        choice->set_index(i);
        // The prompt is the same for every choice: counted once.
        reply.mutable_usage()->set_prompt_tokens(choice->usage().prompt_tokens());
        reply.mutable_usage()->set_generated_tokens(reply.usage().generated_tokens() +
                                                    choice->usage().generated_tokens());
      }
    }
    absl::Status sent;
    if (status.ok()) status = sent = SerializeReply(choices_.call(0), reply, response_);
    // One choice is recorded with the call's status; several with their own, unless the reply
    // could not be sent.
    for (int i = 0; i < choices_.size(); ++i) {
      const absl::Status& recorded = choices_.size() == 1 ? status
                                     : sent.ok()          ? outcomes[i].status
                                                          : sent;
      choices_.call(i).Record(recorded, &*outcomes[i].event);
    }
    FinishCall(status);
  }

  void FinishCall(const absl::Status& status) {
    ReactionEnded(this);
    Finish(ToGrpcStatus(status));  // may run OnDone on another thread: touch nothing afterwards
  }

  ChoiceCalls choices_;
  grpc::ByteBuffer* const response_;
  std::shared_ptr<GenerateCall> self_;  // keeps the reactor alive until OnDone

  absl::Mutex mu_;
  std::vector<Outcome> outcomes_ ABSL_GUARDED_BY(mu_);  // one per choice
  int finals_ ABSL_GUARDED_BY(mu_) = 0;
  int expected_finals_ ABSL_GUARDED_BY(mu_) = -1;  // -1 until Start knows what it started
  absl::Status refusal_ ABSL_GUARDED_BY(mu_);
  int refused_index_ ABSL_GUARDED_BY(mu_) = 0;
};

// ---------------------------------------------------------------- streaming Generate

// Writes every choice's messages in the order they come, each tagged with its choice, and
// finishes once every choice has ended.
class GenerateStreamCall final : public grpc::ServerWriteReactor<grpc::ByteBuffer>,
                                 public ChoiceEvents {
 public:
  static GenerateStreamCall* Start(Gateway* gateway, grpc::CallbackServerContext* context,
                                   const grpc::ByteBuffer* raw) {
    auto call = std::shared_ptr<GenerateStreamCall>(new GenerateStreamCall(gateway));
    call->self_ = call;
    v1::GenerateRequest request;
    absl::Status status = DecodeRequest(*raw, &request);
    call->choices_.Identify(request);
    {
      absl::MutexLock lock(&call->mu_);
      call->statuses_.resize(static_cast<size_t>(call->choices_.size()));
    }
    int started = 0;
    if (status.ok()) {
      status = call->choices_.Start(Gateway::TokenCheck::kCheck, AuthorizationHeader(context),
                                    CallDeadline(context), request, call, &started);
    }
    if (!status.ok()) {
      status = CountedRefusal(context, *raw, status);
      call->choices_.call(started).Record(status, nullptr);
    }
    {
      absl::MutexLock lock(&call->mu_);
      if (!status.ok()) {
        // Refused: the client gets the refusal alone, not the cancelled choices' ends.
        call->refusal_ = status;
        call->write_failed_ = true;
        call->pending_.clear();
      }
      call->expected_finals_ = status.ok() ? call->choices_.size() : started;
      call->started_up_ = true;
      call->MaybeEndLocked();
    }
    call->Pump();
    return call.get();
  }

  void OnChoiceCommit(int index, const CommitEvent& event) override {
    v1::GenerateStreamResponse message = Message(index);
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
    if (cancel) choices_.Cancel();
    Pump();
  }

  void OnChoiceSnapshot(int index, const SnapshotEvent& event) override {
    v1::GenerateStreamResponse message = Message(index);
    FillCanvasSnapshot(event, message.mutable_canvas());
    {
      absl::MutexLock lock(&mu_);
      if (write_failed_) return;
      // Snapshots are provisional: keep only the newest one of each choice waiting, and only
      // while the client keeps up (fewer than kMaxQueuedForSnapshot messages waiting).
      for (auto it = pending_.begin(); it != pending_.end(); ++it) {
        if (it->snapshot && it->message.choice_index() == index) {
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

  void OnChoiceFinal(int index, const FinalEvent& event) override {
    absl::Status status = choices_.call(index).FinalStatus(event);
    const bool several = choices_.size() > 1;
    // One choice: its summary when it succeeded or was cut short, else the call ends with its
    // error. Several: every choice ends with a final, a failed one's carrying its error.
    const bool send_summary = several || status.ok() || event.reason == FinishReason::kCancelled ||
                              event.reason == FinishReason::kDeadline;
    {
      absl::MutexLock lock(&mu_);
      if (!oversized_.ok() && !several) status = oversized_;
      if (send_summary && !write_failed_) {
        v1::GenerateStreamResponse message = Message(index);
        if (several && !status.ok() && event.reason != FinishReason::kCancelled &&
            event.reason != FinishReason::kDeadline) {
          FillChoiceError(choices_.request_id(), index, status, message.mutable_final());
        } else {
          FillGenerateResponse(choices_.request_id(), event, message.mutable_final());
          if (several) message.mutable_final()->set_index(index);
        }
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
    choices_.call(index).Record(status, &event);
    {
      absl::MutexLock lock(&mu_);
      statuses_[static_cast<size_t>(index)] = status;
      ++finals_;
      MaybeEndLocked();
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
    choices_.Cancel();
    ReactionEnded(this);
  }

  void OnDone() override {
    OnDoneStarted(this);
    choices_.Close();
    self_.reset();
  }

 private:
  static constexpr size_t kMaxQueuedForSnapshot = 16;
  struct Pending {
    v1::GenerateStreamResponse message;
    bool snapshot;
  };

  explicit GenerateStreamCall(Gateway* gateway) : choices_(gateway, "GenerateStream", "grpc") {}

  v1::GenerateStreamResponse Message(int index) const {
    v1::GenerateStreamResponse message;
    message.set_request_id(choices_.request_id());
    message.set_choice_index(index);
    return message;
  }

  absl::Status Oversized(const v1::GenerateStreamResponse& message) const {
    return choices_.call(0).CheckReplySize(message);
  }

  // Once every expected final arrived: the call's status, ready for Pump to finish with.
  void MaybeEndLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (final_ready_ || finals_ != expected_finals_) return;
    final_status_ = !refusal_.ok()     ? refusal_
                    : !oversized_.ok() ? oversized_
                                       : CallStatus(statuses_);
    final_ready_ = true;
  }

  // Starts the next write, or finishes the call once the final event arrived and every
  // queued message went out. Decisions are taken under the lock, gRPC is called outside it.
  void Pump() {
    enum { kNothing, kWrite, kFinish } action = kNothing;
    absl::Status status;
    {
      absl::MutexLock lock(&mu_);
      // Nothing goes out before Start knows whether every choice was admitted: a refusal
      // is all the client gets.
      if (writing_ || finished_ || !started_up_) return;
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

  ChoiceCalls choices_;
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
  absl::Status refusal_ ABSL_GUARDED_BY(mu_);    // a choice refused at admission
  std::vector<absl::Status> statuses_ ABSL_GUARDED_BY(mu_);  // each choice's, once final
  int finals_ ABSL_GUARDED_BY(mu_) = 0;
  int expected_finals_ ABSL_GUARDED_BY(mu_) = -1;  // -1 until Start knows what it started
  bool started_up_ ABSL_GUARDED_BY(mu_) = false;
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
