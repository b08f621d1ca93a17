#include "server/engine_request_link.h"

#include "absl/time/clock.h"

namespace dllm {

void EngineRequestLink::Bind(Engine* engine, RequestId id, absl::Time deadline) {
  bool cancel_now = false;
  {
    absl::MutexLock lock(&mu_);
    engine_ = engine;
    id_ = id;
    deadline_ = deadline;
    cancel_now = cancelled_;
  }
  if (cancel_now && ForwardsCancel(absl::Now(), deadline)) engine->Cancel(id);
}

void EngineRequestLink::Cancel() {
  Engine* engine = nullptr;
  RequestId id = 0;
  absl::Time deadline;
  {
    absl::MutexLock lock(&mu_);
    if (!cancelled_) cancel_time_ = absl::Now();
    cancelled_ = true;
    engine = engine_;
    id = id_;
    deadline = deadline_;
  }
  if (engine != nullptr && ForwardsCancel(absl::Now(), deadline)) engine->Cancel(id);
}

bool EngineRequestLink::ForwardsCancel(absl::Time now, absl::Time deadline) {
  return now < deadline - kDeadlineSlack;
}

bool EngineRequestLink::cancelled() const {
  absl::MutexLock lock(&mu_);
  return cancelled_;
}

bool EngineRequestLink::cancelled_by_deadline() const {
  absl::MutexLock lock(&mu_);
  // The same line as ForwardsCancel: a cancellation is the caller's or the deadline's.
  return cancelled_ && !ForwardsCancel(cancel_time_, deadline_);
}

}  // namespace dllm
