// Integer step schedules of the reference samplers: how many tokens each step commits.
//
// LLaDA (docs/models.md §2.6): a block of n masks decoded in `steps_per_block` steps commits
// quota[i] = n / spb + (i < n % spb) tokens at step i.
// Dream (docs/models.md §3.6): timesteps = torch.linspace(1, eps, steps + 1) in float32; step i
// commits int(n_mask * (1 - s / t)) with t = ts[i], s = ts[i + 1] (all float32, truncation
// toward zero), and everything that is left on the last step.
#ifndef DLLM_ENGINE_DECODING_SCHEDULES_H_
#define DLLM_ENGINE_DECODING_SCHEDULES_H_

#include <span>
#include <vector>

namespace dllm {

// quota[i] for i in [0, steps_per_block). steps_per_block >= 1, masks >= 0.
std::vector<int> BlockQuota(int masks, int steps_per_block);

// linspace(start, end, count) in float32 with PyTorch's two-halves formula: step =
// (end - start) / (count - 1); element i = start + step * i for i < count / 2, else
// end - step * (count - 1 - i). Each product and sum is rounded to float32 separately.
std::vector<float> LinspaceF32(float start, float end, int count);

// Dream's timesteps: LinspaceF32(1, eps, steps + 1).
std::vector<float> DreamTimesteps(int steps, float eps);

// Fraction of the remaining masks a confidence algorithm commits at step i: the float32
// value (1 - s / t), or 1 on the last step. Also Dream's `origin` Bernoulli probability.
float DreamTransferFraction(std::span<const float> timesteps, int step);

// Tokens committed at step `step` (0-based) of `steps` when `masks` masks remain.
int DreamTransferCount(std::span<const float> timesteps, int step, int masks);

}  // namespace dllm

#endif  // DLLM_ENGINE_DECODING_SCHEDULES_H_
