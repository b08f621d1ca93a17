// Worker: the engine's one thread that owns the model. Continuous batching:
//
//   loop: take cancellations → finish cancelled/expired queued requests → admit from the
//         FIFO queue while batch slots remain and the head's KV slab fits the budget →
//         finish cancelled/expired active sequences (their KV is freed right there) →
//         plan every active sequence (full or partial) → ONE ragged forward → commit, emit
//         events → retire finished sequences.
//
// Shadow sampling (WorkerOptions::shadow) is ShadowSteps' (engine/scheduler/shadow/): the
// step's forward goes through it, which may add a shadow of one partial step, reported
// before the commit; the step commits exactly what it would have without it, and the
// shadow's time is left out of StepInfo::seconds. Its τ scale applies to every plan.
//
// Cost-aware admission: a request with a deadline that would have to wait (the batch is full
// or requests are queued) is refused at once with RESOURCE_EXHAUSTED and RetryAfter when the
// completion forecast (engine/scheduler/completion_forecast.h) says it cannot finish before
// its deadline: the work ahead of it is the steps left of the running sequences and of the
// queued requests. A request without a deadline, or one that finds a free slot, is never
// refused for load, and nothing is refused before the forecast has measurements.
//
// SLO-aware tau: right after admission and after every step, a running EntropyCache sequence with a
// deadline and a cache.entropy_threshold_under_load (Sequence::can_switch_tau) switches to that tau
// for the rest of its decoding when the time to its deadline is under tau_switch_slack_ratio × its
// forecast time left (its forecast steps left × the measured step time: TauSwitchDue). Under
// load the queue wait eats into every request's slack, so the sequences switch as load grows
// and the lighter steps serve more requests; at light load none does and answers are those
// of the request's own tau. The switch happens at most once per request; SequenceStats and
// the step events report it. Nothing switches before the forecast has measurements. With
// τ autotuning on, the switched steps are held to its mismatch budget by a controller of
// their own (ShadowSteps::load_tau_scale, TauUnderLoad), which can take the switch back to
// the request's own τ.
//
// Every accepted request gets exactly one final event. Cancellation and deadlines take
// effect before the next step. A sequence's tokens depend only on its own request and seed,
// except when SLO-aware tau switches it: then also on the step it switched at, which the
// load decides (and SequenceStats::tau_switch_step reports).
//
// Thread-safety: Enqueue, Cancel and Drain are thread-safe; sinks and the observer are
// called on the worker thread only, never with the queue lock held.
#ifndef DLLM_ENGINE_SCHEDULER_WORKER_H_
#define DLLM_ENGINE_SCHEDULER_WORKER_H_

#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "engine/engine.h"
#include "engine/scheduler/completion_forecast.h"
#include "engine/scheduler/sequence.h"
#include "engine/scheduler/shadow/shadow_steps.h"
#include "engine/scheduler/step_executor.h"

namespace dllm {

struct WorkerOptions {
  int max_batch_sequences = 8;
  int queue_capacity = 64;
  bool refuse_late_requests = true;   // cost-aware admission (above)
  double tau_switch_slack_ratio = 3;  // SLO-aware tau (above); 0: never switch
  SequenceContext context;
  EngineObserver* observer = nullptr;  // not owned; may be null
  ShadowOptions shadow;                // validated by the caller
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
  // What one turn of Loop takes from the shared state: requests refused or evicted before
  // running, requests admitted with their KV, and the cancellations asked for since.
  struct Intake;
  void Loop();
  // Under mu_: waits for work, then fills `in` (evicted and expired requests, cancellations,
  // FIFO admission within the batch and KV limits). False when the worker is stopping and
  // nothing is left.
  bool TakeWork(Intake* in);
  void SweepQueue(absl::Time now, Intake* in) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void AdmitFromQueue(Intake* in) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Outside mu_: finishes the refused requests, starts the admitted ones, and cancels or
  // expires running sequences.
  void ApplyIntake(Intake* in);
  // One decoding step of every active sequence. An exception escaping the step (an allocation
  // failing in the host forward under a memory limit) fails the active sequences with a
  // status, so their callers get a final event and the worker keeps serving.
  void RunStep();
  void RunStepUnchecked();
  void RetireDone();
  // SLO-aware tau (above): switches the active sequences whose deadline is at risk, from the
  // forecast just published in running_steps_left_.
  void SwitchTausDue() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether requests wait in the queue (ShadowSteps runs no shadow then).
  bool requests_waiting() const;
  // Forecast steps of a pending request, and of each queued one in queue order.
  std::optional<double> StepsOf(const PendingRequest& request) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::vector<double> QueuedSteps() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The forecast for a request needing `own_steps` enqueued now, behind the running
  // sequences and the queue. nullopt without measurements.
  std::optional<CompletionForecast::Times> ForecastNow(double own_steps) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Sequence-steps of the running and queued requests (0 without measurements).
  double StepsAhead() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // OK, or the load refusal of `request` (see cost-aware admission above).
  absl::Status ForecastAdmission(const PendingRequest& request) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A RESOURCE_EXHAUSTED refusal with RetryAfter: the forecast wait for a batch slot, at
  // least 1 s.
  absl::Status LoadRefusal(absl::string_view message) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const WorkerOptions options_;
  StepExecutor* const executor_;
  ShadowSteps shadow_;  // worker thread only

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
  CompletionForecast forecast_ ABSL_GUARDED_BY(mu_);
  // Forecast steps left of each active sequence (nullopt: no forecast yet), published by the
  // worker after every step.
  std::optional<std::vector<double>> running_steps_left_ ABSL_GUARDED_BY(mu_);

  // Worker thread only.
  std::vector<std::unique_ptr<Sequence>> active_;
  // The step RetireDone reports to the forecast (0 sequences: none since the last report).
  double last_step_seconds_ = 0;
  int last_step_sequences_ = 0;

  std::thread thread_;
};

}  // namespace dllm

#endif  // DLLM_ENGINE_SCHEDULER_WORKER_H_
