#include "engine/backend/cpu/cpu_attention.h"

#include <algorithm>
#include <cmath>
#include <cstddef>

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

// Wider vectors where the CPU has them. The clones run the same per-lane arithmetic (no FMA:
// "avx2" does not enable it, and no reassociation without -ffast-math), so results are
// bit-identical across clones and machines with the same libm.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define DLLM_ATTENTION_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define DLLM_ATTENTION_CLONES
#endif

}  // namespace

DLLM_ATTENTION_CLONES
void CpuAttentionRow(const float* q, const float* k_plane, const float* v_plane, int kv_positions,
                     const CpuAttentionGeometry& g, float* out, std::vector<float>* scratch) {
  const int d = g.head_dim;
  const int64_t kv_width = int64_t{g.num_kv_heads} * d;
  const int group = g.num_heads / g.num_kv_heads;
  constexpr int kB = kAttentionBlock;
  // Per head of the group: kB scores, the running accumulator and the block accumulator.
  scratch->resize(static_cast<size_t>(group) * (kB + 2 * d));
  float* scores = scratch->data();
  float* acc = scores + static_cast<ptrdiff_t>(group) * kB;
  float* block_acc = acc + static_cast<ptrdiff_t>(group) * d;
  std::vector<kmath::OnlineSoftmax> state(group);

  for (int kv = 0; kv < g.num_kv_heads; ++kv) {
    const float* qg = q + int64_t{kv} * group * d;  // the group's query heads are contiguous
    for (int h = 0; h < group; ++h) state[h] = kmath::OnlineSoftmax();
    for (int i = 0; i < group * d; ++i) acc[i] = 0.0f;
    for (int begin = 0; begin < kv_positions; begin += kB) {
      const int nb = std::min(kB, kv_positions - begin);
      for (int j = 0; j < nb; ++j) {
        const float* krow =
            k_plane + static_cast<ptrdiff_t>(begin + j) * kv_width + int64_t{kv} * d;
        for (int h = 0; h < group; ++h)
          scores[h * kB + j] = Dot(qg + static_cast<ptrdiff_t>(h) * d, krow, d) * g.scale;
      }
      for (int h = 0; h < group; ++h) {
        float* s = scores + static_cast<ptrdiff_t>(h) * kB;
        float block_max = s[0];
        for (int j = 1; j < nb; ++j) block_max = s[j] > block_max ? s[j] : block_max;
        float block_sum = 0.0f;
        for (int j = 0; j < nb; ++j) {
          s[j] = std::exp(s[j] - block_max);  // now the block-relative weight
          block_sum += s[j];
        }
        kmath::OnlineSoftmax block;
        block.max = block_max;
        block.sum = block_sum;
        float scale_old, scale_block;
        kmath::OnlineSoftmaxMerge(&state[h], block, &scale_old, &scale_block);
        float* a = acc + static_cast<ptrdiff_t>(h) * d;
        float* ba = block_acc + static_cast<ptrdiff_t>(h) * d;
        // ba[i] = sum over j (ascending) of s[j] * v[j][i], 16 columns at a time so the
        // partial sums stay in registers.
        const float* v0 = v_plane + static_cast<ptrdiff_t>(begin) * kv_width + int64_t{kv} * d;
        int i0 = 0;
        for (; i0 + 16 <= d; i0 += 16) {
          float t[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
          for (int j = 0; j < nb; ++j) {
            const float* vr = v0 + j * kv_width + i0;
            const float w = s[j];
            for (int l = 0; l < 16; ++l) t[l] += w * vr[l];
          }
          for (int l = 0; l < 16; ++l) ba[i0 + l] = t[l];
        }
        for (; i0 < d; ++i0) {
          float t = 0.0f;
          for (int j = 0; j < nb; ++j) t += s[j] * v0[j * kv_width + i0];
          ba[i0] = t;
        }
        for (int i = 0; i < d; ++i) a[i] = a[i] * scale_old + ba[i] * scale_block;
      }
    }
    for (int h = 0; h < group; ++h) {
      float* o = out + (int64_t{kv} * group + h) * d;
      const float inv = state[h].sum > 0.0f ? 1.0f / state[h].sum : 0.0f;
      for (int i = 0; i < d; ++i) o[i] = acc[h * d + i] * inv;
    }
  }
}

}  // namespace dllm
