// ShadowBudget: caps the wall time that shadow steps take to a fraction of the engine's
// step time (ShadowOptions::max_time_fraction, engine/shadow_sampling.h).
//
// A shadow is a full forward, so with shadows on a fraction r of the partial steps the cost
// is about r x (full-step time / partial-step time), which grows with the very speed-up the
// cache buys (docs/entropy-drift.md, "Cost of shadow sampling"). A fixed rate therefore
// cannot promise a fixed cost; this budget does. It is a token bucket over seconds: the
// credit grows by fraction x each step's seconds, and a shadow spends its own seconds. A
// shadow may start while the credit is not negative. The credit saved up while no shadow was
// drawn is capped at the longest shadow so far: enough that rare draws (a 1% rate) are not
// lost to the wait after the previous one, too little for a burst. Over any run, total
// shadow seconds <= fraction x total step seconds + 2 x the longest single shadow.
//
// Skipping depends only on time already spent, never on the step's content (its entropy or
// policy), so the samples that do run remain a uniform draw of the partial steps.
//
// Thread-safety: none; ShadowSteps owns it, on the engine's worker thread.
#ifndef DLLM_ENGINE_SCHEDULER_SHADOW_SHADOW_BUDGET_H_
#define DLLM_ENGINE_SCHEDULER_SHADOW_SHADOW_BUDGET_H_

namespace dllm {

class ShadowBudget {
 public:
  // max_time_fraction > 0; +infinity means unbounded.
  explicit ShadowBudget(double max_time_fraction) : fraction_(max_time_fraction) {}

  // Whether a shadow may run in the coming step.
  bool allows() const { return credit_seconds_ >= 0.0; }
  // One engine step: its own seconds (shadow excluded) and its shadow's (0 when none).
  void Record(double step_seconds, double shadow_seconds);

 private:
  const double fraction_;
  double credit_seconds_ = 0.0;
  double longest_shadow_seconds_ = 0.0;  // the credit's cap
};

}  // namespace dllm

#endif  // DLLM_ENGINE_SCHEDULER_SHADOW_SHADOW_BUDGET_H_
