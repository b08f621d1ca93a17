// CompletionForecast: when would a request finish if admitted now? The worker's cost-aware
// admission (engine/scheduler/worker.h) refuses at once a request that, at the current load,
// cannot finish before its deadline, instead of letting it use compute until it expires.
//
// Work is counted in sequence-steps (one sequence's denoising step). A request with M answer
// masks needs about M × (steps per mask) of them, where steps per mask is measured on the
// last 64 sequences that finished decoding (their mean; 0.3 means ~3.4 tokens per step),
// bounded by its step cap. (Forecasting the request itself at a slower pace than the mean,
// the 75th or 90th percentile or the slowest of the 64, refused more requests that would have
// made it than it saved: SLO attainment on the val split, averaged over 1-2x saturation on
// this CPU's profile and at H100 costs, was 0.78 with the mean against 0.77, 0.77 and 0.73.) Time
// per step is measured too. Continuous batching with B slots is then played forward in steps: each
// running sequence holds its slot for the steps it has left, each queued request (first in, first
// out) takes the first slot that frees and holds it for its own steps, and a new request starts
// when a slot frees after them:
//
//   seconds = (start + own) × step_seconds
//
// (A fluid model, (work ahead + own) / B, is optimistic by up to `own`: a request's steps run
// one after the other, in one slot.) step_seconds is measured at the current batch size, so
// under overload (where admission matters) it is the full batch's step time.
//
// Both measurements are exponential moving averages; until one step and one finished
// sequence were seen there is no forecast (nullopt), and the worker admits.
//
// Thread-safety: none; the worker guards it with its queue lock.
#ifndef DLLM_ENGINE_SCHEDULER_COMPLETION_FORECAST_H_
#define DLLM_ENGINE_SCHEDULER_COMPLETION_FORECAST_H_

#include <optional>
#include <span>
#include <vector>

namespace dllm {

// SLO-aware tau's rule (worker.h): whether a running sequence with `steps_left` forecast steps,
// at `step_seconds` each, and `seconds_to_deadline` left should switch to its tau under
// load: seconds_to_deadline < slack_ratio × steps_left × step_seconds. A ratio of 0 never
// switches; 1 switches once the forecast finish passes the deadline.
bool TauSwitchDue(double seconds_to_deadline, double steps_left, double step_seconds,
                  double slack_ratio);

class CompletionForecast {
 public:
  // `batch_slots` >= 1: the worker's max_batch_sequences.
  explicit CompletionForecast(int batch_slots);

  // A step of `sequences` (>= 1) sequences that took `seconds`.
  void ObserveStep(double seconds, int sequences);
  // A sequence that finished decoding in `steps` steps, starting from `masks` masks (>= 1).
  void ObserveFinished(int masks, int steps);

  // Sequence-steps left for `masks` masks, at most `steps_cap` (0: no cap), at the mean steps
  // per mask of the last 64 finished sequences. nullopt before one was observed.
  std::optional<double> Steps(int masks, int steps_cap) const;
  // When a request needing `own_steps` would start and finish, in seconds from now, behind
  // running sequences with `running_steps` left each (at most B of them) and queued requests
  // needing `queued_steps` each, in queue order. nullopt before a step was observed.
  struct Times {
    double start_s = 0;
    double finish_s = 0;
  };
  std::optional<Times> Forecast(std::span<const double> running_steps,
                                std::span<const double> queued_steps, double own_steps) const;
  // Seconds to work off `ahead_steps` sequence-steps at full batch: the load signal (0 before
  // a step).
  double BacklogSeconds(double ahead_steps) const;
  // The measured seconds of one step of the current batch; nullopt before a step.
  std::optional<double> step_seconds() const { return step_seconds_; }

 private:
  const int batch_slots_;
  std::optional<double> step_seconds_;
  std::vector<double> recent_;  // steps per mask, a ring of the last finished sequences
  size_t next_recent_ = 0;
};

}  // namespace dllm

#endif  // DLLM_ENGINE_SCHEDULER_COMPLETION_FORECAST_H_
