// EngineRequestLink: ties one gRPC call to the engine request it submitted, so that a client
// cancellation reaches the engine whether it arrives before, during or after Submit.
//
// gRPC also reports an expired deadline through OnCancel. The engine ends such a request by
// itself at its next step (GenerationRequest::deadline is the call's deadline) with
// DEADLINE_EXCEEDED rather than CANCELLED, so only a cancellation more than kDeadlineSlack
// before the deadline is forwarded to the engine. The client's own deadline timer fires
// slightly before the server's (see cancelled_by_deadline), and forwarding that cancellation
// made the engine report finish reason `cancelled` for what the client saw as
// DEADLINE_EXCEEDED; left to the engine, such a request runs at most kDeadlineSlack plus one
// step longer and ends as `deadline` in the reply, the log and the metrics alike.
//
// Thread-safety: all methods are thread-safe (gRPC's OnCancel runs on any thread).
#ifndef DLLM_SERVER_ENGINE_REQUEST_LINK_H_
#define DLLM_SERVER_ENGINE_REQUEST_LINK_H_

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "engine/engine.h"

namespace dllm {

class EngineRequestLink {
 public:
  // Records the submitted request; cancels it at once when the client already cancelled.
  void Bind(Engine* engine, RequestId id, absl::Time deadline);
  // The client cancelled (or the deadline passed): forwards to the engine once bound.
  void Cancel();
  bool cancelled() const;
  // True when the cancellation came at (or within kDeadlineSlack before) the call's deadline.
  // The client's deadline timer fires before the server's (the server computes its deadline
  // from grpc-timeout when the headers arrive), so a client whose deadline passed shows up
  // here as a cancellation slightly before the deadline; it must count as DEADLINE_EXCEEDED,
  // which is what the client sees. A genuine cancel inside the slack is reported the same way.
  bool cancelled_by_deadline() const;
  static constexpr absl::Duration kDeadlineSlack = absl::Milliseconds(100);
  // Whether a cancellation at `now` is the caller's (forwarded to the engine) rather than
  // the deadline's (left to the engine's own deadline check).
  static bool ForwardsCancel(absl::Time now, absl::Time deadline);

 private:
  mutable absl::Mutex mu_;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  absl::Time cancel_time_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  Engine* engine_ ABSL_GUARDED_BY(mu_) = nullptr;
  RequestId id_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Time deadline_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
};

}  // namespace dllm

#endif  // DLLM_SERVER_ENGINE_REQUEST_LINK_H_
