// ShadowSteps: everything the worker does for shadow sampling (engine/shadow_sampling.h),
// behind the step's forward. It owns which step gets a shadow, the shadow's cost budget
// (ShadowBudget), the measurement and report of each sample (shadow_measure.h) and the τ
// controller that learns from them (TauController).
//
// Per engine step the worker calls, in this order:
//   tau_scale()  the factor on every EntropyCache τ for the step's plans, and
//   load_tau_scale()  the factor on the τ under load of switched sequences;
//   Forward()    instead of StepExecutor::Run: the step's forward, plus its shadow when one
//                is drawn, measured and reported before the worker commits anything;
//   EndStep()    with the step's wall time: returns the step's own seconds (the shadow's
//                left out) and charges both to the budget.
//
// Which step: when the observer is set and the budget has room, at most one sequence per step
// whose planned step is a partial step drawn at its rate (the request's
// cache.shadow_sample_rate, else ShadowOptions::sample_rate). While requests wait in the
// queue only sequences switched to their τ under load are eligible (Sequence::tau_switched):
// shadows are a luxury of idle capacity, except for the evidence the switch's quality budget
// needs. The draw is a pure function of (request id, step) through the counter RNG (domain
// "shdw"), so it depends on nothing else in the batch; the draws are scanned from a rotating
// start so that no sequence is favoured. Skipping depends only on the queue, the switch and
// time already spent, never on a step's content, so the samples that run stay a uniform draw
// of the partial steps of their kind (switched or not).
//
// The shadow: the drawn sequence's logits are captured by the step's own forward
// (StepExecutor::RunCapturingLogits, bitwise the same results as Run), then a full forward of
// the same canvas runs into a scratch slab (StepExecutor::RunShadow) while the canvas is
// still the one the step saw. The sample goes to the τ controller of its kind (switched
// steps have their own, capped at 1: shadow_sampling.h), then to
// EngineObserver::OnShadowSample with that controller's scale after it. A shadow is observation
// only: the step's results, hence its commits, are those it would have without it. A failing
// shadow (no KV room for the scratch slab, an executor without shadow support) only costs
// the sample, never the request.
//
// Thread-safety: none; the worker owns it and calls it on its thread only. The observer and
// executor are not owned and must outlive it.
#ifndef DLLM_ENGINE_SCHEDULER_SHADOW_SHADOW_STEPS_H_
#define DLLM_ENGINE_SCHEDULER_SHADOW_SHADOW_STEPS_H_

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "engine/engine.h"
#include "engine/model/step_batch.h"
#include "engine/scheduler/sequence.h"
#include "engine/scheduler/shadow/shadow_budget.h"
#include "engine/scheduler/shadow/tau_controller.h"
#include "engine/scheduler/step_executor.h"
#include "engine/shadow_sampling.h"

namespace dllm {

class ShadowSteps {
 public:
  // `options` validated by the caller (ValidateShadowOptions). `observer` may be null (no
  // shadows then: nobody to report to).
  ShadowSteps(const ShadowOptions& options, EngineObserver* observer, StepExecutor* executor);

  // The factor every EntropyCache τ is multiplied by in the coming step (1 unless τ
  // autotuning is on).
  float tau_scale() const { return tau_.scale(); }
  // The factor on a switched sequence's τ under load in the coming step, in (0, 1]: 1 unless
  // τ autotuning is on and switched steps exceeded the mismatch budget (TauUnderLoad).
  float load_tau_scale() const { return load_tau_.scale(); }

  // The step's forward: `batch.sequences[i]` is the planned step of `sequences[i]` and
  // `kv[i]` its handle (same lengths), as for StepExecutor::Run; the sequences are only read.
  // `result` gets one entry per sequence, one RowStats per predict position, or
  // the error is returned (INTERNAL when the executor returns another count). When a shadow
  // is drawn it runs here too, before the caller commits; its sample is reported to the
  // observer. `requests_waiting` (which may take the caller's queue lock) is called only when
  // a shadow could otherwise run, and then before the forward.
  absl::Status Forward(const StepBatch& batch, std::span<KvHandle* const> kv,
                       std::span<const std::unique_ptr<Sequence>> sequences,
                       absl::FunctionRef<bool()> requests_waiting, StepResult* result);

  // Ends the step Forward ran: `elapsed_seconds` is its wall time from planning through the
  // commits. Returns the step's own seconds, elapsed minus this step's shadow (what
  // EngineObserver::StepInfo::seconds reports), and records both with the budget.
  double EndStep(double elapsed_seconds);

 private:
  // The index in `sequences` of the one to shadow this step, or -1.
  int Pick(std::span<const std::unique_ptr<Sequence>> sequences,
           absl::FunctionRef<bool()> requests_waiting);
  // Runs, measures and reports the shadow of `sequences[shadow]`; sets shadow_seconds_.
  void RunShadow(const StepBatch& batch, std::span<KvHandle* const> kv, const Sequence& sequence,
                 int shadow, const StepResult& result,
                 std::span<const std::vector<float>> partial_logits);

  const float sample_rate_;  // for requests without their own rate
  EngineObserver* const observer_;
  StepExecutor* const executor_;
  TauController tau_;       // fed by the samples of steps at a request's own τ
  TauController load_tau_;  // fed by those of switched steps; its scale is at most 1
  ShadowBudget budget_;
  uint64_t steps_ = 0;         // steps run, rotates the scan for a drawn sequence
  double shadow_seconds_ = 0;  // the current step's shadow (0 when none ran)
};

}  // namespace dllm

#endif  // DLLM_ENGINE_SCHEDULER_SHADOW_SHADOW_STEPS_H_
