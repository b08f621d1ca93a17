// TauController: EntropyCache τ autotuning from shadow samples.
//
// The engine's shadow steps measure, for a sample of partial steps, whether a token the step
// commits differs from the one a full forward proposes at its position (token mismatch,
// ShadowSample::token_mismatch; not the decision mismatch, which also counts a token that only
// lands a step earlier or later and which threshold decoding keeps near 20% at any τ). The
// controller keeps that rate under a budget by scaling every EntropyCache τ of the engine.
//
// It moves the scale only on evidence. Samples accumulate from the last move; once there are
// at least `window_samples`, the one-sided 95% Wilson bounds of the rate decide: a lower
// bound above the budget divides the scale by `step_factor` (more refreshes), an upper bound
// under half the budget multiplies it (fewer refreshes), and either move starts a new count.
// Otherwise the count keeps growing, up to 20 × window_samples, where it starts over with the
// scale unchanged (the rate is within the band, or too close to it to tell; starting over
// keeps the estimate about recent traffic). A fixed window compared with the budget, as an
// earlier version did, cannot hold a budget finer than 1/window: with windows of 20 and a 2%
// budget, every window without a mismatch (2/3 of them at a true rate of 2%) loosened τ, so the
// scale rose while the rate was above the budget (docs/benchmarks.md).
// The scale is clamped to [min_scale, max_scale]. A request's own τ is a preference the scale
// applies to, so requests keep their relative order of strictness. Policies without τ (none,
// dual, interval, ...) are unaffected.
//
// Thread-safety: none; ShadowSteps owns it, on the engine's worker thread.
#ifndef DLLM_ENGINE_SCHEDULER_SHADOW_TAU_CONTROLLER_H_
#define DLLM_ENGINE_SCHEDULER_SHADOW_TAU_CONTROLLER_H_

#include "engine/shadow_sampling.h"

namespace dllm {

// One-sided Wilson score bounds of a rate from `events` out of `samples` (> 0) at normal
// quantile z: lower <= events / samples <= upper, both in [0, 1].
struct RateBounds {
  double lower = 0;
  double upper = 1;
};
RateBounds WilsonBounds(int events, int samples, double z);

class TauController {
 public:
  // z of a one-sided 95% bound.
  static constexpr double kZ = 1.6448536269514722;
  // An undecided count starts over after this many windows.
  static constexpr int kMaxWindows = 20;

  explicit TauController(const TauAutotuneOptions& options) : options_(options) {}

  // The factor every EntropyCache τ is multiplied by now (1 while disabled).
  float scale() const { return static_cast<float>(scale_); }
  // One shadow sample's outcome. Returns true when this sample moved the scale or started
  // the count over (a decision was taken; the scale may be unchanged at a bound).
  bool Observe(bool token_mismatch);

 private:
  const TauAutotuneOptions options_;
  double scale_ = 1.0;
  int samples_ = 0;
  int mismatches_ = 0;
};

}  // namespace dllm

#endif  // DLLM_ENGINE_SCHEDULER_SHADOW_TAU_CONTROLLER_H_
