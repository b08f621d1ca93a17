#include "engine/scheduler/row_budget.h"

#include <algorithm>
#include <numeric>

namespace dllm {

std::vector<bool> SelectWithinRowBudget(std::span<const PlannedStep> steps, int64_t max_step_rows,
                                        int max_deferred_steps) {
  std::vector<bool> run(steps.size(), true);
  if (max_step_rows <= 0) return run;
  int64_t total = 0;
  for (const PlannedStep& s : steps) total += s.rows;
  if (total <= max_step_rows) return run;
  std::vector<size_t> eligible;
  for (size_t i = 0; i < steps.size(); ++i) {
    if (steps[i].full && steps[i].can_defer && steps[i].deferred_steps < max_deferred_steps) {
      eligible.push_back(i);
    }
  }
  std::sort(eligible.begin(), eligible.end(), [&](size_t a, size_t b) {
    if (steps[a].rows != steps[b].rows) return steps[a].rows > steps[b].rows;
    return steps[a].order > steps[b].order;
  });
  size_t running = steps.size();
  for (size_t i : eligible) {
    if (total <= max_step_rows || running == 1) break;
    run[i] = false;
    total -= steps[i].rows;
    --running;
  }
  return run;
}

}  // namespace dllm
