#include "engine/decoding/schedules.h"

namespace dllm {

std::vector<int> BlockQuota(int masks, int steps_per_block) {
  std::vector<int> quota(steps_per_block > 0 ? steps_per_block : 0);
  if (steps_per_block <= 0) return quota;
  const int base = masks / steps_per_block;
  const int extra = masks % steps_per_block;
  for (int i = 0; i < steps_per_block; ++i) quota[i] = base + (i < extra ? 1 : 0);
  return quota;
}

// volatile stores force a float32 rounding after every operation, so the compiler cannot
// fuse a multiply-add (which would round once and change the last bit).
static float RoundF32(float x) {
  volatile float v = x;
  return v;
}

std::vector<float> LinspaceF32(float start, float end, int count) {
  std::vector<float> out(count > 0 ? count : 0);
  if (count <= 0) return out;
  if (count == 1) {
    out[0] = start;
    return out;
  }
  const float step = RoundF32((end - start) / static_cast<float>(count - 1));
  const int halfway = count / 2;
  for (int i = 0; i < count; ++i) {
    if (i < halfway) {
      out[i] = RoundF32(start + RoundF32(step * static_cast<float>(i)));
    } else {
      out[i] = RoundF32(end - RoundF32(step * static_cast<float>(count - 1 - i)));
    }
  }
  return out;
}

std::vector<float> DreamTimesteps(int steps, float eps) {
  return LinspaceF32(1.0f, eps, steps + 1);
}

float DreamTransferFraction(std::span<const float> timesteps, int step) {
  const int steps = static_cast<int>(timesteps.size()) - 1;
  if (step >= steps - 1) return 1.0f;
  const float t = timesteps[step];
  const float s = timesteps[step + 1];
  const float ratio = RoundF32(s / t);
  return RoundF32(1.0f - ratio);
}

int DreamTransferCount(std::span<const float> timesteps, int step, int masks) {
  const int steps = static_cast<int>(timesteps.size()) - 1;
  if (step >= steps - 1) return masks;
  const float product =
      RoundF32(static_cast<float>(masks) * DreamTransferFraction(timesteps, step));
  return static_cast<int>(product);  // C++ float->int conversion truncates toward zero
}

}  // namespace dllm
