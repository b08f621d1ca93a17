#include "engine/backend/cpu/cpu_attention.h"

#include "engine/backend/kernel_math.h"

namespace dllm {
namespace {

// Eight interleaved partial sums combined in a fixed order (vectorizes without reassociation).
inline float Dot(const float* a, const float* b, int n) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int l = 0; l < 8; ++l) acc[l] += a[i + l] * b[i + l];
  }
  for (; i < n; ++i) acc[i & 7] += a[i] * b[i];
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

}  // namespace

void CpuAttentionRow(const float* q, const float* k_plane, const float* v_plane, int kv_positions,
                     const CpuAttentionGeometry& g, float* out, float* acc) {
  const int d = g.head_dim;
  const int kv_width = g.num_kv_heads * d;
  const int group = g.num_heads / g.num_kv_heads;
  for (int h = 0; h < g.num_heads; ++h) {
    const float* qh = q + h * d;
    const int kv_offset = (h / group) * d;
    kmath::OnlineSoftmax state;
    for (int i = 0; i < d; ++i) acc[i] = 0.0f;
    for (int n = 0; n < kv_positions; ++n) {
      const float score =
          Dot(qh, k_plane + static_cast<int64_t>(n) * kv_width + kv_offset, d) * g.scale;
      float rescale, weight;
      kmath::OnlineSoftmaxAdd(&state, score, &rescale, &weight);
      const float* vn = v_plane + static_cast<int64_t>(n) * kv_width + kv_offset;
      if (rescale != 1.0f) {
        for (int i = 0; i < d; ++i) acc[i] = acc[i] * rescale + weight * vn[i];
      } else {
        for (int i = 0; i < d; ++i) acc[i] += weight * vn[i];
      }
    }
    float* oh = out + h * d;
    const float inv = state.sum > 0.0f ? 1.0f / state.sum : 0.0f;
    for (int i = 0; i < d; ++i) oh[i] = acc[i] * inv;
  }
}

}  // namespace dllm
