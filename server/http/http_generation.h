// HttpGeneration: the engine's EventSink for one HTTP generation call, and the owner of its
// GatewayCall (admission, submission, the open-call count, the call record). The engine
// worker appends events and calls the wake function (SetWake); the HTTP connection then takes
// them (Take) and writes them. The call counts as open until the last owner (the engine, the
// connection writing the reply) lets go of it.
//
// What is kept for a slow reader: every committed text delta and every step event's
// committed tokens (never dropped), but only the newest step's provisional proposals (a step
// still waiting when a newer one arrives loses them), as the gRPC stream keeps only the newest
// canvas snapshot.
//
// Thread-safety: the On* methods run on the engine worker, the rest on the connection's
// strand; the state they share is guarded by a mutex. The wake function is called under
// that mutex, so once SetWake(nullptr) returns it is never called again.
#ifndef DLLM_SERVER_HTTP_HTTP_GENERATION_H_
#define DLLM_SERVER_HTTP_HTTP_GENERATION_H_

#include <atomic>
#include <deque>
#include <functional>
#include <optional>
#include <string>
#include <utility>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "dllm/v1/dllm.pb.h"
#include "engine/engine.h"
#include "server/gateway_call.h"
#include "server/response_mapping.h"

namespace dllm {

class HttpGeneration final : public EventSink {
 public:
  // `method` labels the call record ("ChatCompletions", "Completions"; a static string).
  HttpGeneration(Gateway* gateway, const char* method) : call_(gateway, method, "http") {}

  void OnCommit(const CommitEvent& event) override {
    if (event.text_delta.empty() && event.text_logprobs.empty()) return;
    Item item{event.text_delta, std::nullopt};
    if (!event.text_logprobs.empty()) {
      v1::CommittedDelta delta;
      FillCommittedDelta(event, &delta);
      item.logprobs = std::move(*delta.mutable_text_logprobs());
    }
    {
      absl::MutexLock lock(&mu_);
      items_.push_back(std::move(item));
    }
    Wake();
  }

  // Step events (stream_options.include_steps). Their committed tokens are never dropped; the
  // provisional proposals of a step not yet sent are, once a newer step arrives: like the
  // gRPC stream's canvas snapshots, they only matter while they are the newest.
  void OnStep(const StepEvent& event) override {
    {
      absl::MutexLock lock(&mu_);
      // Only the newest queued step can still hold proposals: look back to it, no further.
      for (auto it = items_.rbegin(); it != items_.rend(); ++it) {
        if (!it->step) continue;
        if (!it->provisional_dropped) {
          it->step->provisional_positions.clear();
          it->step->provisional_tokens.clear();
          it->provisional_dropped = true;
        }
        break;
      }
      items_.push_back(Item{std::string(), event});
    }
    Wake();
  }

  void OnFinal(const FinalEvent& event) override {
    // A request cancelled because its answer reached a stop string succeeded.
    absl::Status status = stopped_by_sequence_.load() && event.reason == FinishReason::kCancelled
                              ? absl::OkStatus()
                              : call_.FinalStatus(event);
    v1::GenerateResponse response;
    FillGenerateResponse(call_.request_id(), event, &response);
    if (status.ok()) status = call_.CheckReplySize(response);
    call_.Record(status, &event);
    {
      absl::MutexLock lock(&mu_);
      final_status_ = status;
      final_ = std::move(response);
    }
    Wake();
  }

  GatewayCall& call() { return call_; }

  // The answer reached a stop string: the rest is not needed, end the request now.
  void StopBySequence() {
    if (stopped_by_sequence_.exchange(true)) return;
    call_.Cancel();
  }

  // A committed text delta, or a step event (stream_options.include_steps), in engine order.
  struct Item {
    std::string delta;
    std::optional<StepEvent> step;
    bool provisional_dropped = false;
    // With logprobs: those of the answer tokens `delta` makes final (CommitEvent::text_logprobs).
    google::protobuf::RepeatedPtrField<v1::TokenLogprob> logprobs;
  };
  struct Taken {
    std::deque<Item> items;
    std::optional<v1::GenerateResponse> final;
    absl::Status status;
  };
  // Takes what arrived so far (the final response only after every delta).
  Taken Take() {
    Taken out;
    absl::MutexLock lock(&mu_);
    out.items.swap(items_);
    if (final_) {
      out.final = std::move(final_);
      out.status = final_status_;
      final_.reset();
    }
    return out;
  }

  // `wake` is called (from the engine worker, never blocking) after each event, and once at
  // once if events are waiting. Null: no more calls.
  void SetWake(std::function<void()> wake) {
    absl::MutexLock lock(&mu_);
    wake_ = std::move(wake);
    if (wake_ && (!items_.empty() || final_)) wake_();
  }

 private:
  void Wake() {
    absl::MutexLock lock(&mu_);
    if (wake_) wake_();
  }

  GatewayCall call_;
  std::atomic<bool> stopped_by_sequence_{false};

  absl::Mutex mu_;
  std::deque<Item> items_ ABSL_GUARDED_BY(mu_);
  std::optional<v1::GenerateResponse> final_ ABSL_GUARDED_BY(mu_);
  absl::Status final_status_ ABSL_GUARDED_BY(mu_);
  std::function<void()> wake_ ABSL_GUARDED_BY(mu_);
};

}  // namespace dllm

#endif  // DLLM_SERVER_HTTP_HTTP_GENERATION_H_
