// HttpGeneration: the engine's EventSink for one HTTP generation call. The engine worker
// appends events; the connection thread takes them (Take, WaitForEvents) and writes them.
// An eventfd wakes the connection thread, which also watches the client's socket, so a
// disconnect is seen at once.
//
// What is kept for a slow reader: every committed text delta and every step event's
// committed tokens (never dropped), but only the newest step's provisional proposals (a step
// still waiting when a newer one arrives loses them), as the gRPC stream keeps only the newest
// canvas snapshot.
//
// Thread-safety: the On* methods run on the engine worker, the rest on the connection
// thread; the state they share is guarded by a mutex.
#ifndef DLLM_SERVER_HTTP_GENERATION_H_
#define DLLM_SERVER_HTTP_GENERATION_H_

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <deque>
#include <optional>
#include <string>
#include <utility>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "dllm/v1/dllm.pb.h"
#include "engine/engine.h"
#include "server/diffusion_service.h"
#include "server/engine_request_link.h"
#include "server/response_mapping.h"
#include "server/status_mapping.h"

namespace dllm {

class HttpGeneration final : public EventSink {
 public:
  HttpGeneration(DiffusionService* service, std::string method, std::string request_id,
                 absl::Time start)
      : service_(service),
        method_(std::move(method)),
        request_id_(std::move(request_id)),
        start_(start),
        wake_fd_(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {}
  ~HttpGeneration() override {
    if (wake_fd_ >= 0) close(wake_fd_);
  }

  void OnCommit(const CommitEvent& event) override {
    if (event.text_delta.empty()) return;
    {
      absl::MutexLock lock(&mu_);
      items_.push_back(Item{event.text_delta, std::nullopt});
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
    const absl::Status status =
        stopped_by_sequence_.load() && event.reason == FinishReason::kCancelled
            ? absl::OkStatus()
            : service_->FinalAbslStatus(event, link_);
    service_->RecordCall(method_.c_str(), request_id_, ToGrpcStatus(status), &event, start_,
                         "http");
    v1::GenerateResponse response;
    FillGenerateResponse(request_id_, event, &response);
    {
      absl::MutexLock lock(&mu_);
      final_status_ = status;
      final_ = std::move(response);
    }
    Wake();
  }

  EngineRequestLink& link() { return link_; }

  // The answer reached a stop string: the rest is not needed, end the request now.
  void StopBySequence() {
    if (stopped_by_sequence_.exchange(true)) return;
    link_.Cancel();
  }

  // A committed text delta, or a step event (stream_options.include_steps), in engine order.
  struct Item {
    std::string delta;
    std::optional<StepEvent> step;
    bool provisional_dropped = false;
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

  // Blocks until an event arrives (true) or the client's socket `fd` closes (false).
  // fd < 0: no socket to watch; wakes up every 50 ms to let the caller check otherwise.
  bool WaitForEvents(int fd) {
    {
      absl::MutexLock lock(&mu_);
      if (!items_.empty() || final_) return true;
    }
    pollfd fds[2] = {{wake_fd_, POLLIN, 0}, {fd, POLLRDHUP, 0}};
    const int n = poll(fds, fd >= 0 ? 2 : 1, fd >= 0 ? -1 : 50);
    if (n > 0 && (fds[0].revents & POLLIN)) {
      uint64_t value = 0;
      (void)!read(wake_fd_, &value, sizeof(value));
    }
    if (fd >= 0 && (fds[1].revents & (POLLRDHUP | POLLHUP | POLLERR))) return false;
    return true;
  }

 private:
  void Wake() {
    const uint64_t one = 1;
    (void)!write(wake_fd_, &one, sizeof(one));
  }

  DiffusionService* const service_;
  const std::string method_;
  const std::string request_id_;
  const absl::Time start_;
  const int wake_fd_;
  EngineRequestLink link_;
  std::atomic<bool> stopped_by_sequence_{false};

  absl::Mutex mu_;
  std::deque<Item> items_ ABSL_GUARDED_BY(mu_);
  std::optional<v1::GenerateResponse> final_ ABSL_GUARDED_BY(mu_);
  absl::Status final_status_ ABSL_GUARDED_BY(mu_);
};

}  // namespace dllm

#endif  // DLLM_SERVER_HTTP_GENERATION_H_
