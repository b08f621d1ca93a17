#include "engine/backend/cpu/cpu_attention.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>

#include "engine/backend/cpu/cpu_chain_gemm.h"
#include "engine/backend/cpu/cpu_vector_math.h"

namespace dllm {
namespace {

// This query head's kv head, K transposed into scratch->k_t ([d, L]): q·k runs its chains
// across positions, so K's columns become rows.
const float* TransposeKeys(const float* k_plane, int head, int64_t L, const CpuAttentionGeometry& g,
                           CpuAttentionScratch* scratch) {
  const int d = g.head_dim;
  const int64_t kv_width = int64_t{g.num_kv_heads} * d;
  const int kv_head = head / (g.num_heads / g.num_kv_heads);
  const float* k_head = k_plane + int64_t{kv_head} * d;
  scratch->k_t.resize(static_cast<size_t>(d * L));
  float* k_t = scratch->k_t.data();
  for (int64_t j = 0; j < L; ++j) {
    const float* kj = k_head + j * kv_width;
    for (int i = 0; i < d; ++i) k_t[i * L + j] = kj[i];
  }
  return k_t;
}

// Unnormalized softmax numerators e_j = exp(scale * q·k_j - max) of `nr` rows into `scores`
// ([nr, L]) and 1 / sum_j e_j into inv_sum.
void ExpScores(const float* q, int64_t row_stride, int nr, int head, const float* k_t, int64_t L,
               const CpuAttentionGeometry& g, float* scores, float* inv_sum) {
  const int d = g.head_dim;
  CpuChainGemm(q + int64_t{head} * d, row_stride, nr, k_t, L, d, L, scores, L);
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
    inv_sum[r] = 1.0f / sum;  // sum >= 1: the max term is exp(0)
  }
}

// Calls use(r0, nr, scores, inv_sum) for each block of up to kAttentionRowBlock query rows
// [r0, r0 + nr): scores[r * L + j] = exp(q·k_j · scale − the row's max), inv_sum[r] = 1 /
// the row's sum (ExpScores). One block's scores fit in cache; `scratch` holds them.
template <typename UseBlock>
void ForEachScoreBlock(const float* q, int64_t row_stride, int rows, int head, const float* k_plane,
                       int64_t L, const CpuAttentionGeometry& g, CpuAttentionScratch* scratch,
                       UseBlock use) {
  const float* k_t = TransposeKeys(k_plane, head, L, g, scratch);
  const int block = std::min(rows, kAttentionRowBlock);
  scratch->scores.resize(static_cast<size_t>(block * L));
  scratch->inv_sum.resize(static_cast<size_t>(block));
  for (int r0 = 0; r0 < rows; r0 += block) {
    const int nr = std::min(block, rows - r0);
    ExpScores(q + r0 * row_stride, row_stride, nr, head, k_t, L, g, scratch->scores.data(),
              scratch->inv_sum.data());
    use(r0, nr, scratch->scores.data(), scratch->inv_sum.data());
  }
}

// Adds weight * e_j / sum of each row of a score block to out's rows.
void AddProbabilities(int nr, const float* scores, const float* inv_sum, int64_t L, float weight,
                      float* out, int64_t out_stride) {
  for (int r = 0; r < nr; ++r) {
    CpuAddScaled(scores + r * L, L, weight * inv_sum[r], out + r * out_stride);
  }
}

}  // namespace

void CpuAttentionHead(const float* q, int64_t row_stride, int rows, int head, const float* k_plane,
                      const float* v_plane, int kv_positions, const CpuAttentionGeometry& g,
                      float* out, CpuAttentionScratch* scratch, CpuProbsSink* probs) {
  const int d = g.head_dim;
  const int64_t L = kv_positions;
  if (L == 0) {
    for (int r = 0; r < rows; ++r) std::fill_n(out + r * row_stride + int64_t{head} * d, d, 0.0f);
    return;
  }
  const int64_t kv_width = int64_t{g.num_kv_heads} * d;
  const int kv_head = head / (g.num_heads / g.num_kv_heads);
  const float* v_head = v_plane + int64_t{kv_head} * d;
  // P·V reads V in place ([position, dim] is already [reduction, output]).
  ForEachScoreBlock(
      q, row_stride, rows, head, k_plane, L, g, scratch,
      [&](int r0, int nr, const float* scores, const float* inv_sum) {
        float* o = out + r0 * row_stride + int64_t{head} * d;
        CpuChainGemm(scores, L, nr, v_head, kv_width, L, d, o, row_stride);
        for (int r = 0; r < nr; ++r) {
          for (int i = 0; i < d; ++i) o[r * row_stride + i] *= inv_sum[r];
        }
        if (probs == nullptr) return;
        const auto start = std::chrono::steady_clock::now();
        AddProbabilities(nr, scores, inv_sum, L, probs->weight, probs->out + r0 * probs->stride,
                         probs->stride);
        probs->seconds +=
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      });
}

void CpuAttentionProbsHead(const float* q, int64_t row_stride, int rows, int head,
                           const float* k_plane, int kv_positions, const CpuAttentionGeometry& g,
                           float weight, float* out, int64_t out_stride,
                           CpuAttentionScratch* scratch) {
  const int64_t L = kv_positions;
  if (L == 0 || rows == 0) return;
  ForEachScoreBlock(q, row_stride, rows, head, k_plane, L, g, scratch,
                    [&](int r0, int nr, const float* scores, const float* inv_sum) {
                      AddProbabilities(nr, scores, inv_sum, L, weight, out + r0 * out_stride,
                                       out_stride);
                    });
}

}  // namespace dllm
