// Worker: the engine's one thread that owns the model. Continuous batching:
//
//   loop: take cancellations → finish cancelled/expired queued requests → admit from the
//         FIFO queue while batch slots remain and the head's KV slab fits the budget →
//         finish cancelled/expired active sequences (their KV is freed right there) →
//         plan every active sequence (full or partial) → ONE ragged forward → commit, emit
//         events → retire finished sequences.
//
// Shadow steps (shadow_sample_rate > 0, with an observer): when no request waits in the
// queue and the shadow time budget has room (ShadowBudget, shadow_max_time_fraction), at
// most one sequence per step whose partial step was drawn (Sequence::ShadowDrawn;
// the draws are scanned from a rotating start so no sequence is favoured) gets its logits
// captured, then a full forward of the same canvas into a scratch slab before the commit.
// The result goes to EngineObserver::OnShadowSample; the step commits exactly what it would
// have without it, and the shadow's time is left out of StepInfo::seconds. With
// tau_autotune enabled, each sample also feeds the TauController, whose scale multiplies
// every EntropyCache τ from the next step on.
//
// Every accepted request gets exactly one final event. Cancellation and deadlines take
// effect before the next step. A sequence's tokens depend only on its own request and seed.
//
// Thread-safety: Enqueue, Cancel and Drain are thread-safe; sinks and the observer are
// called on the worker thread only, never with the queue lock held.
#ifndef DLLM_ENGINE_SCHEDULER_WORKER_H_
#define DLLM_ENGINE_SCHEDULER_WORKER_H_

#include <deque>
#include <limits>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "engine/engine.h"
#include "engine/scheduler/sequence.h"
#include "engine/scheduler/shadow_budget.h"
#include "engine/scheduler/step_executor.h"
#include "engine/scheduler/tau_controller.h"

namespace dllm {

struct WorkerOptions {
  int max_batch_sequences = 8;
  int queue_capacity = 64;
  SequenceContext context;
  EngineObserver* observer = nullptr;  // not owned; may be null
  float shadow_sample_rate = 0.0f;     // default for requests without their own rate
  // Shadow seconds / step seconds cap (> 0; infinity: none); see ShadowBudget.
  double shadow_max_time_fraction = std::numeric_limits<double>::infinity();
  TauAutotuneOptions tau_autotune;  // validated by the caller
};

class Worker {
 public:
  // Starts the worker thread. `executor` is not owned and must outlive the worker.
  Worker(WorkerOptions options, StepExecutor* executor);
  // Cancels everything left (final status CANCELLED) and joins the thread.
  ~Worker();

  // RESOURCE_EXHAUSTED when the queue is at capacity, UNAVAILABLE when draining. A full
  // queue first gives up the slots of queued requests whose deadline passed or whose caller
  // cancelled them (they still get their final event, from the worker, with
  // DEADLINE_EXCEEDED / CANCELLED), so expired requests never cause a rejection.
  absl::Status Enqueue(PendingRequest request);
  void Cancel(RequestId id);
  // Stops admitting, waits up to `timeout` for in-flight work, then cancels the rest; returns
  // once every accepted request got its final event.
  void Drain(absl::Duration timeout);

  // Accepted requests without a final event yet (queued + running).
  int in_flight() const;

 private:
  void Loop();
  void RunStep();
  // The active sequence to shadow this step, or -1.
  int PickShadow();
  void RetireDone();

  const WorkerOptions options_;
  StepExecutor* const executor_;
  TauController tau_;           // worker thread only
  ShadowBudget shadow_budget_;  // worker thread only

  mutable absl::Mutex mu_;
  std::deque<PendingRequest> queue_ ABSL_GUARDED_BY(mu_);
  // Taken out of queue_ by Enqueue (expired or cancelled); finished by the worker, since
  // sinks run on the worker thread only. Still counted in in_flight_.
  std::vector<PendingRequest> evicted_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_set<RequestId> cancel_requests_ ABSL_GUARDED_BY(mu_);
  bool draining_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool cancel_all_ ABSL_GUARDED_BY(mu_) = false;
  std::string cancel_all_message_ ABSL_GUARDED_BY(mu_);
  int in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  int running_ ABSL_GUARDED_BY(mu_) = 0;

  // Worker thread only.
  std::vector<std::unique_ptr<Sequence>> active_;
  uint64_t steps_run_ = 0;  // rotates the shadow scan

  std::thread thread_;
};

}  // namespace dllm

#endif  // DLLM_ENGINE_SCHEDULER_WORKER_H_
