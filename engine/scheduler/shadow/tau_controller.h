// TauController: EntropyCache τ autotuning from shadow samples (issue 17's stretch goal).
//
// The engine's shadow steps measure, for a sample of partial steps, whether a token the step
// commits differs from the one a full forward proposes at its position (token mismatch,
// ShadowSample::token_mismatch; not the decision mismatch, which also counts a token that only
// lands a step earlier or later and which threshold decoding keeps near 20% at any τ). The
// controller keeps that rate under a budget by scaling every EntropyCache τ of the engine:
// after each window of `window_samples` samples, a mismatch rate above the budget divides
// the scale by `step_factor` (more refreshes), a rate under half the budget multiplies it
// (fewer refreshes), in between it stays. The scale is clamped to [min_scale, max_scale].
// A request's own τ is a preference the scale applies to, so requests keep their relative
// order of strictness. Policies without τ (none, dual, interval) are unaffected.
//
// Thread-safety: none; ShadowSteps owns it, on the engine's worker thread.
#ifndef DLLM_ENGINE_SCHEDULER_SHADOW_TAU_CONTROLLER_H_
#define DLLM_ENGINE_SCHEDULER_SHADOW_TAU_CONTROLLER_H_

#include "engine/shadow_sampling.h"

namespace dllm {

class TauController {
 public:
  explicit TauController(const TauAutotuneOptions& options) : options_(options) {}

  // The factor every EntropyCache τ is multiplied by now (1 while disabled).
  float scale() const { return static_cast<float>(scale_); }
  // One shadow sample's outcome. Returns true when this sample closed a window and the scale
  // was re-evaluated.
  bool Observe(bool token_mismatch);

 private:
  const TauAutotuneOptions options_;
  double scale_ = 1.0;
  int samples_ = 0;
  int mismatches_ = 0;
};

}  // namespace dllm

#endif  // DLLM_ENGINE_SCHEDULER_SHADOW_TAU_CONTROLLER_H_
