#include "engine/scheduler/worker.h"

#include <algorithm>
#include <chrono>
#include <exception>
#include <new>
#include <numeric>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace dllm {

Worker::Worker(WorkerOptions options, StepExecutor* executor)
    : options_(std::move(options)),
      executor_(executor),
      shadow_(options_.shadow, options_.observer, executor),
      forecast_(options_.max_batch_sequences) {
  thread_ = std::thread([this] { Loop(); });
}

Worker::~Worker() {
  {
    absl::MutexLock lock(&mu_);
    draining_ = true;
    stopping_ = true;
    if (!cancel_all_) {
      cancel_all_ = true;
      cancel_all_message_ = "engine shut down";
    }
  }
  thread_.join();
}

absl::Status Worker::Enqueue(PendingRequest request) {
  absl::MutexLock lock(&mu_);
  if (draining_) return absl::UnavailableError("engine is draining or shut down");
  if (static_cast<int>(queue_.size()) >= options_.queue_capacity) {
    // Queued requests whose deadline passed (or that their caller cancelled) must not hold
    // a slot until the next step: move them out for the worker to finish, then re-check.
    const absl::Time now = options_.context.clock->Now();
    for (auto it = queue_.begin(); it != queue_.end();) {
      if (now >= it->request.deadline || cancel_requests_.contains(it->id)) {
        evicted_.push_back(std::move(*it));
        it = queue_.erase(it);
      } else {
        ++it;
      }
    }
  }
  if (static_cast<int>(queue_.size()) >= options_.queue_capacity) {
    return LoadRefusal(
        absl::StrCat("request queue is full (capacity ", options_.queue_capacity, ")"));
  }
  if (absl::Status st = ForecastAdmission(request); !st.ok()) return st;
  queue_.push_back(std::move(request));
  ++in_flight_;
  return absl::OkStatus();
}

std::optional<double> Worker::StepsOf(const PendingRequest& request) const {
  return forecast_.Steps(request.answer_masks(options_.context.mask_token_id),
                         request.request.decoding.max_denoising_steps);
}

std::vector<double> Worker::QueuedSteps() const {
  std::vector<double> queued;
  queued.reserve(queue_.size());
  for (const PendingRequest& q : queue_) queued.push_back(StepsOf(q).value_or(0));
  return queued;
}

std::optional<CompletionForecast::Times> Worker::ForecastNow(double own_steps) const {
  if (!running_steps_left_.has_value()) return std::nullopt;
  return forecast_.Forecast(*running_steps_left_, QueuedSteps(), own_steps);
}

double Worker::StepsAhead() const {
  if (!running_steps_left_.has_value()) return 0;
  const std::vector<double> queued = QueuedSteps();
  return std::accumulate(running_steps_left_->begin(), running_steps_left_->end(), 0.0) +
         std::accumulate(queued.begin(), queued.end(), 0.0);
}

absl::Status Worker::ForecastAdmission(const PendingRequest& request) const {
  const bool must_wait = !queue_.empty() || running_ >= options_.max_batch_sequences;
  if (!options_.refuse_late_requests || request.request.deadline == absl::InfiniteFuture() ||
      !must_wait) {
    return absl::OkStatus();
  }
  const std::optional<double> own = StepsOf(request);
  if (!own.has_value()) return absl::OkStatus();
  const std::optional<CompletionForecast::Times> times = ForecastNow(*own);
  if (!times.has_value()) return absl::OkStatus();
  const double left_s =
      absl::ToDoubleSeconds(request.request.deadline - options_.context.clock->Now());
  if (times->finish_s <= left_s) return absl::OkStatus();
  return LoadRefusal(absl::StrFormat(
      "the request cannot finish before its deadline at the current load: forecast %.1f s "
      "(%.1f s waiting for a batch slot behind %d running and %d queued), deadline in %.1f s",
      times->finish_s, times->start_s, running_, static_cast<int>(queue_.size()),
      std::max(0.0, left_s)));
}

absl::Status Worker::LoadRefusal(absl::string_view message) const {
  absl::Status status = absl::ResourceExhaustedError(message);
  const std::optional<CompletionForecast::Times> times = ForecastNow(0);
  SetRetryAfter(absl::Seconds(std::max(1.0, times.has_value() ? times->start_s : 0.0)), &status);
  return status;
}

void Worker::Cancel(RequestId id) {
  absl::MutexLock lock(&mu_);
  cancel_requests_.insert(id);
}

int Worker::in_flight() const {
  absl::MutexLock lock(&mu_);
  return in_flight_;
}

bool Worker::requests_waiting() const {
  absl::MutexLock lock(&mu_);
  return !queue_.empty();
}

void Worker::Drain(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  draining_ = true;
  auto idle = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return in_flight_ == 0; };
  if (!mu_.AwaitWithTimeout(absl::Condition(&idle), timeout)) {
    if (!cancel_all_) {
      cancel_all_ = true;
      cancel_all_message_ = "cancelled by engine drain (timeout)";
    }
    mu_.Await(absl::Condition(&idle));
  }
}

struct Worker::Intake {
  std::vector<std::pair<PendingRequest, absl::Status>> rejected;
  std::vector<std::pair<PendingRequest, std::unique_ptr<KvHandle>>> admitted;
  absl::flat_hash_set<RequestId> cancels;
  bool cancel_all = false;
  std::string cancel_all_message;

  bool Cancels(RequestId id) const { return cancel_all || cancels.contains(id); }
  absl::Status Cancelled() const {
    return absl::CancelledError(cancel_all ? cancel_all_message : "cancelled by the caller");
  }
};

void Worker::Loop() {
  while (true) {
    Intake in;
    if (!TakeWork(&in)) break;
    ApplyIntake(&in);
    RetireDone();
    if (!active_.empty()) {
      RunStep();
      RetireDone();
    }
  }
}

bool Worker::TakeWork(Intake* in) {
  absl::MutexLock lock(&mu_);
  auto has_work = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return !active_.empty() || !queue_.empty() || !evicted_.empty() || stopping_;
  };
  mu_.Await(absl::Condition(&has_work));
  if (stopping_ && queue_.empty() && active_.empty() && evicted_.empty()) return false;
  in->cancels.swap(cancel_requests_);
  in->cancel_all = cancel_all_;
  in->cancel_all_message = cancel_all_message_;
  SweepQueue(options_.context.clock->Now(), in);
  AdmitFromQueue(in);
  return true;
}

void Worker::SweepQueue(absl::Time now, Intake* in) {
  // Evicted by Enqueue: expired, or cancelled by their caller.
  for (PendingRequest& pending : evicted_) {
    if (now >= pending.request.deadline) {
      in->rejected.emplace_back(std::move(pending),
                                absl::DeadlineExceededError("deadline passed while queued"));
    } else {
      in->rejected.emplace_back(std::move(pending), in->Cancelled());
    }
  }
  evicted_.clear();
  for (auto it = queue_.begin(); it != queue_.end();) {
    if (in->Cancels(it->id)) {
      in->rejected.emplace_back(std::move(*it), in->Cancelled());
      it = queue_.erase(it);
    } else if (now >= it->request.deadline) {
      in->rejected.emplace_back(std::move(*it),
                                absl::DeadlineExceededError("deadline passed while queued"));
      it = queue_.erase(it);
    } else {
      ++it;
    }
  }
}

void Worker::AdmitFromQueue(Intake* in) {
  while (!queue_.empty() &&
         static_cast<int>(active_.size() + in->admitted.size()) < options_.max_batch_sequences) {
    PendingRequest& head = queue_.front();
    const int positions = head.canvas_positions();
    // FIFO: a head that does not fit waits for memory, unless nothing runs, in which case it
    // can never fit.
    const bool alone = active_.empty() && in->admitted.empty();
    if (!executor_->KvFits(positions, head.request.cache)) {
      if (!alone) break;
      in->rejected.emplace_back(
          std::move(head), absl::ResourceExhaustedError(absl::StrCat(
                               "KV memory for ", positions, " positions does not fit the budget")));
      queue_.pop_front();
      continue;
    }
    absl::StatusOr<std::unique_ptr<KvHandle>> kv =
        executor_->AllocateKv(positions, head.request.cache);
    if (!kv.ok()) {
      if (!alone) break;
      in->rejected.emplace_back(std::move(head), kv.status());
      queue_.pop_front();
      continue;
    }
    in->admitted.emplace_back(std::move(head), std::move(*kv));
    queue_.pop_front();
  }
}

void Worker::ApplyIntake(Intake* in) {
  EngineObserver* observer = options_.observer;
  const absl::Time now = options_.context.clock->Now();
  for (auto& [pending, status] : in->rejected) {
    const FinishReason reason = absl::IsCancelled(status)          ? FinishReason::kCancelled
                                : absl::IsDeadlineExceeded(status) ? FinishReason::kDeadline
                                                                   : FinishReason::kError;
    FinishPending(pending, status, reason, now, observer);
  }
  for (auto& [pending, kv] : in->admitted) {
    active_.push_back(
        std::make_unique<Sequence>(std::move(pending), std::move(kv), options_.context, now));
  }
  for (auto& seq : active_) {
    if (in->Cancels(seq->id())) {
      seq->Finish(in->Cancelled(), FinishReason::kCancelled, observer);
    } else if (now >= seq->request().deadline) {
      seq->Finish(absl::DeadlineExceededError("deadline exceeded"), FinishReason::kDeadline,
                  observer);
    }
  }
  absl::MutexLock lock(&mu_);
  in_flight_ -= static_cast<int>(in->rejected.size());
}

void Worker::RunStep() {
  absl::Status failed;
  try {
    RunStepUnchecked();
    return;
  } catch (const std::bad_alloc&) {
    failed = absl::ResourceExhaustedError("out of host memory during a decoding step");
  } catch (const std::exception& e) {
    failed = absl::InternalError(absl::StrCat("a decoding step failed: ", e.what()));
  }
  for (auto& seq : active_) seq->Finish(failed, FinishReason::kError, options_.observer);
}

void Worker::RunStepUnchecked() {
  const auto start = std::chrono::steady_clock::now();
  // The forecast times steps on the engine's clock (virtual in the serving simulator). It
  // includes a shadow step's time, which is run only while no request waits.
  const absl::Time clock_start = options_.context.clock->Now();
  EngineObserver::StepInfo info;
  StepBatch batch;
  std::vector<KvHandle*> handles;
  batch.sequences.reserve(active_.size());
  handles.reserve(active_.size());
  for (auto& seq : active_) {
    batch.sequences.push_back(seq->PlanStep(shadow_.tau_scale(), shadow_.load_tau_scale()));
    handles.push_back(seq->kv());
  }
  StepResult result;
  // The forward, and the shadow of one partial step when one is drawn (reported before the
  // commits below, which it does not change).
  absl::Status status = shadow_.Forward(
      batch, handles, active_, [this] { return requests_waiting(); }, &result);
  EngineObserver* observer = options_.observer;
  if (!status.ok()) {
    for (auto& seq : active_) seq->Finish(status, FinishReason::kError, observer);
  } else {
    for (size_t i = 0; i < active_.size(); ++i) {
      Sequence& seq = *active_[i];
      // A policy that decides from the forward may ask for a second pass of this sequence's
      // step (Elastic-Cache's deep layers over every row). It runs alone; its failure ends
      // this request only.
      if (std::optional<SequenceStep> again = seq.ObserveForward(batch.sequences[i], result[i])) {
        StepBatch one;
        one.sequences.push_back(*again);
        KvHandle* handle = handles[i];
        StepResult rerun;
        absl::Status s = executor_->Run(one, std::span<KvHandle* const>(&handle, 1), &rerun);
        if (s.ok() && rerun.size() != 1) {
          s = absl::InternalError("the recompute pass returned no result");
        }
        if (!s.ok()) {
          seq.Finish(s, FinishReason::kError, observer);
          continue;
        }
        seq.ObserveRecompute(*again, rerun[0]);
        result[i] = std::move(rerun[0]);
      }
      absl::Status applied = seq.ApplyStep(result[i], &info);
      if (!applied.ok()) {
        seq.Finish(applied, FinishReason::kError, observer);
      } else if (seq.finished_decoding()) {
        seq.Finish(absl::OkStatus(), FinishReason::kLength, observer);
      }
    }
  }
  info.seconds = shadow_.EndStep(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  if (observer != nullptr) observer->OnStep(info);
  last_step_seconds_ = absl::ToDoubleSeconds(options_.context.clock->Now() - clock_start);
  last_step_sequences_ = info.sequences;
}

void Worker::SwitchTausDue() {
  const std::optional<double> step_seconds = forecast_.step_seconds();
  if (!step_seconds.has_value() || options_.tau_switch_slack_ratio <= 0) return;
  const absl::Time now = options_.context.clock->Now();
  for (size_t i = 0; i < active_.size(); ++i) {
    Sequence& seq = *active_[i];
    if (!seq.can_switch_tau()) continue;
    const double to_deadline = absl::ToDoubleSeconds(seq.request().deadline - now);
    if (TauSwitchDue(to_deadline, (*running_steps_left_)[i], *step_seconds,
                     options_.tau_switch_slack_ratio)) {
      seq.SwitchTauUnderLoad();
    }
  }
}

void Worker::RetireDone() {
  // What the forecast learns: sequences that finished decoding (not cancelled or failed)
  // and the step just run.
  std::vector<std::pair<int, int>> finished;  // masks at start, steps
  for (const auto& seq : active_) {
    if (seq->done() && seq->finished_decoding()) {
      finished.emplace_back(seq->masks_at_start(), seq->steps_done());
    }
  }
  const size_t before = active_.size();
  active_.erase(std::remove_if(active_.begin(), active_.end(),
                               [](const std::unique_ptr<Sequence>& s) { return s->done(); }),
                active_.end());
  const int retired = static_cast<int>(before - active_.size());
  EngineObserver::QueueInfo queue;
  {
    absl::MutexLock lock(&mu_);
    in_flight_ -= retired;
    running_ = static_cast<int>(active_.size());
    queue.waiting = static_cast<int>(queue_.size());
    if (last_step_sequences_ > 0) forecast_.ObserveStep(last_step_seconds_, last_step_sequences_);
    last_step_sequences_ = 0;
    for (const auto& [masks, steps] : finished) forecast_.ObserveFinished(masks, steps);
    running_steps_left_.reset();
    if (forecast_.Steps(1, 0).has_value()) {  // steps per mask measured
      std::vector<double> left;
      left.reserve(active_.size());
      for (const auto& seq : active_) {
        const int cap = seq->request().decoding.max_denoising_steps;
        left.push_back(
            forecast_.Steps(seq->masks_left(), cap > 0 ? std::max(1, cap - seq->steps_done()) : 0)
                .value_or(0.0));
      }
      running_steps_left_ = std::move(left);
      SwitchTausDue();
    }
    queue.backlog_seconds = forecast_.BacklogSeconds(StepsAhead());
  }
  if (options_.observer != nullptr) {
    queue.running = static_cast<int>(active_.size());
    queue.kv_usage_ratio = executor_->KvUsageRatio();
    options_.observer->OnQueue(queue);
  }
}

}  // namespace dllm
