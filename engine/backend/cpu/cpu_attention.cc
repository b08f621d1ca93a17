#include "engine/backend/cpu/cpu_attention.h"

#include <algorithm>
#include <cmath>
#include <cstddef>

#include "engine/backend/cpu/cpu_chain_gemm.h"
#include "engine/backend/cpu/cpu_vector_math.h"

namespace dllm {

void CpuAttentionHead(const float* q, int64_t row_stride, int rows, int head, const float* k_plane,
                      const float* v_plane, int kv_positions, const CpuAttentionGeometry& g,
                      float* out, CpuAttentionScratch* scratch) {
  const int d = g.head_dim;
  const int64_t L = kv_positions;
  if (L == 0) {
    for (int r = 0; r < rows; ++r) std::fill_n(out + r * row_stride + int64_t{head} * d, d, 0.0f);
    return;
  }
  const int64_t kv_width = int64_t{g.num_kv_heads} * d;
  const int kv_head = head / (g.num_heads / g.num_kv_heads);
  const float* k_head = k_plane + int64_t{kv_head} * d;
  const float* v_head = v_plane + int64_t{kv_head} * d;

  // q·k runs its chains across positions, so K's columns become rows: K^T [d, L]. P·V reads
  // V in place ([position, dim] is already [reduction, output]).
  scratch->k_t.resize(static_cast<size_t>(d * L));
  float* k_t = scratch->k_t.data();
  for (int64_t j = 0; j < L; ++j) {
    const float* kj = k_head + j * kv_width;
    for (int i = 0; i < d; ++i) k_t[i * L + j] = kj[i];
  }

  const int block = std::min(rows, kAttentionRowBlock);
  scratch->scores.resize(static_cast<size_t>(block * L));
  scratch->inv_sum.resize(static_cast<size_t>(block));
  float* scores = scratch->scores.data();
  for (int r0 = 0; r0 < rows; r0 += block) {
    const int nr = std::min(block, rows - r0);
    CpuChainGemm(q + r0 * row_stride + int64_t{head} * d, row_stride, nr, k_t, L, d, L, scores, L);
    for (int r = 0; r < nr; ++r) {
      float* s = scores + r * L;
      float m = -INFINITY;
      for (int64_t j = 0; j < L; ++j) {
        s[j] = s[j] * g.scale;
        m = std::max(m, s[j]);
      }
      CpuExpShifted(s, L, m);
      float sum = 0.0f;
      for (int64_t j = 0; j < L; ++j) sum += s[j];
      scratch->inv_sum[r] = 1.0f / sum;  // sum >= 1: the max term is exp(0)
    }
    float* o = out + r0 * row_stride + int64_t{head} * d;
    CpuChainGemm(scores, L, nr, v_head, kv_width, L, d, o, row_stride);
    for (int r = 0; r < nr; ++r) {
      for (int i = 0; i < d; ++i) o[r * row_stride + i] *= scratch->inv_sum[r];
    }
  }
}

}  // namespace dllm
