// Row budget per step: which planned sequence steps run in this engine step, so that one
// sequence's full refresh (every canvas row) does not stretch the step that every other
// sequence waits on. vLLM's max_num_batched_tokens plays the same part for prefill chunks.
//
// A full step that would push the step's query rows past the budget waits (is deferred) and
// is planned again at the next step. Only steps whose policy plans repeatably are deferred
// (CachePolicy::CanReplan), so a deferred sequence's tokens are exactly those it would have
// produced: it only runs later. A sequence is deferred at most `max_deferred_steps` steps in a
// row, and a step never defers every sequence, so every sequence keeps progressing.
//
// Thread-safety: pure function.
#ifndef DLLM_ENGINE_SCHEDULER_ROW_BUDGET_H_
#define DLLM_ENGINE_SCHEDULER_ROW_BUDGET_H_

#include <cstdint>
#include <span>
#include <vector>

namespace dllm {

struct PlannedStep {
  int64_t rows = 0;        // query rows of the planned step
  bool full = false;       // a full refresh
  bool can_defer = false;  // its policy plans repeatably
  int deferred_steps = 0;  // steps in a row it has already waited
  uint64_t order = 0;      // admission order (request id): later ones wait first
};

// run[i]: whether `steps[i]` runs now. `max_step_rows` 0: no budget (all run). Deferred are
// the largest eligible full steps first (ties: the latest admitted), until the rest fit or
// none is eligible; the rows of partial steps are never cut.
std::vector<bool> SelectWithinRowBudget(std::span<const PlannedStep> steps, int64_t max_step_rows,
                                        int max_deferred_steps);

}  // namespace dllm

#endif  // DLLM_ENGINE_SCHEDULER_ROW_BUDGET_H_
