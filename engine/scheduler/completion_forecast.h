// CompletionForecast: when would a request finish if admitted now? The worker's cost-aware
// admission (engine/scheduler/worker.h) refuses at once a request that, at the current load,
// cannot finish before its deadline, instead of letting it use compute until it expires.
//
// Work is counted in sequence-steps (one sequence's denoising step). A request with M answer
// masks needs about M × (steps per mask) of them, where steps per mask is measured on the
// sequences that finished decoding (an average of 0.3 means ~3.4 tokens per step), bounded
// by its step cap. Time per step is measured too. With W sequence-steps ahead of it (the
// steps left of the running sequences and of the queued requests) and B batch slots, the
// forecast is the fluid approximation of continuous batching:
//
//   seconds = max(own × step_seconds, (W + own) × step_seconds / B)
//
// The first term is the request alone at the current step time; the second is the backlog's
// share of the batch. step_seconds is measured at the current batch size, so under overload
// (where admission matters) it is the full batch's step time.
//
// Both measurements are exponential moving averages; until one step and one finished
// sequence were seen there is no forecast (nullopt), and the worker admits.
//
// Thread-safety: none; the worker guards it with its queue lock.
#ifndef DLLM_ENGINE_SCHEDULER_COMPLETION_FORECAST_H_
#define DLLM_ENGINE_SCHEDULER_COMPLETION_FORECAST_H_

#include <optional>

namespace dllm {

class CompletionForecast {
 public:
  // `batch_slots` >= 1: the worker's max_batch_sequences.
  explicit CompletionForecast(int batch_slots);

  // A step of `sequences` (>= 1) sequences that took `seconds`.
  void ObserveStep(double seconds, int sequences);
  // A sequence that finished decoding in `steps` steps, starting from `masks` masks (>= 1).
  void ObserveFinished(int masks, int steps);

  // Sequence-steps left for `masks` masks, at most `steps_cap` (0: no cap). nullopt before
  // a finished sequence was observed.
  std::optional<double> Steps(int masks, int steps_cap) const;
  // Seconds until a request needing `own_steps` finishes with `ahead_steps` sequence-steps
  // ahead of it (see above). nullopt before a step was observed.
  std::optional<double> SecondsToFinish(double own_steps, double ahead_steps) const;
  // Seconds to work off `ahead_steps` at full batch: the load signal (0 before a step).
  double BacklogSeconds(double ahead_steps) const;

 private:
  const int batch_slots_;
  std::optional<double> step_seconds_;
  std::optional<double> steps_per_mask_;
};

}  // namespace dllm

#endif  // DLLM_ENGINE_SCHEDULER_COMPLETION_FORECAST_H_
