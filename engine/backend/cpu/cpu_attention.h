// Bidirectional GQA attention of one query head over a sequence's K/V slab, on the host in
// fp32, built on CpuChainGemm so that it is batch-invariant and SIMD-target-invariant by
// construction.
//
// Numerics contract, for query row r of head h (kv head h / (heads / kv_heads)) over cached
// positions j = 0 .. kv_positions-1:
//   - dot_j = q_r · k_j as one fma chain over i = 0 .. head_dim-1 (cpu_chain_gemm.h), then
//     s_j = dot_j * scale;
//   - m = max_j s_j; e_j = CpuExpF(s_j - m) (cpu_vector_math.h); sum = e_0 + e_1 + ... in
//     increasing j;
//   - o_i = (fma chain over j = 0 .. kv_positions-1 of e_j * v_j[i]) * (1 / sum).
// So a row's output depends only on its query row and the slab: not on the other rows in the
// call, their number, the thread that runs it or the SIMD target (CpuExpF gives the same bits
// on every target). Scores are held for kAttentionRowBlock rows at a time, never for the
// whole sequence.
#ifndef DLLM_ENGINE_BACKEND_CPU_CPU_ATTENTION_H_
#define DLLM_ENGINE_BACKEND_CPU_CPU_ATTENTION_H_

#include <cstdint>
#include <vector>

namespace dllm {

// Query rows whose scores [rows, kv_positions] are held at once (memory bound, not numerics).
inline constexpr int kAttentionRowBlock = 192;

struct CpuAttentionGeometry {
  int num_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
  float scale = 0;
};

// Buffers one thread reuses across calls; grown on demand. Not shared between threads.
struct CpuAttentionScratch {
  std::vector<float> scores;   // [row block, kv_positions]
  std::vector<float> k_t;      // this kv head's K transposed: [head_dim, kv_positions]
  std::vector<float> inv_sum;  // [row block]
};

// Where CpuAttentionHead also adds its head's share of the head-averaged attention
// probabilities, fused into the pass (the softmax numerators of a row block are in cache
// there, so the probabilities cost one scaled add per key instead of a second q.K pass):
// row r of the call gets weight / sum_r * e_r,j added at out + r * stride, kv_positions values,
// through CpuAddScaled (the same values CpuAttentionProbsHead adds). `seconds` accumulates the
// time spent on them, the figure a cache policy's decision cost is charged with.
struct CpuProbsSink {
  float* out = nullptr;
  int64_t stride = 0;
  float weight = 0;
  double seconds = 0;
};

// Attention of query head `head` for `rows` query rows.
//   q:      row r at q + r * row_stride, heads side by side ([num_heads * head_dim] used);
//   k_plane, v_plane: position j at + j * num_kv_heads * head_dim, kv heads side by side,
//           at least kv_positions positions;
//   out:    row r at out + r * row_stride; only this head's head_dim columns are written.
// kv_positions == 0 writes zeros. `probs`, when not null, receives the probabilities above.
void CpuAttentionHead(const float* q, int64_t row_stride, int rows, int head, const float* k_plane,
                      const float* v_plane, int kv_positions, const CpuAttentionGeometry& g,
                      float* out, CpuAttentionScratch* scratch, CpuProbsSink* probs = nullptr);

// Adds `weight` * softmax(scale * q_r . K^T) of query head `head` to out row r
// (out + r * out_stride, kv_positions values) for `rows` query rows: the same scores as
// CpuAttentionHead (one fma chain per q.k, CpuExpF), normalized by the sum's reciprocal.
// AttentionProbabilities calls it once per head with weight 1 / num_heads.
void CpuAttentionProbsHead(const float* q, int64_t row_stride, int rows, int head,
                           const float* k_plane, int kv_positions, const CpuAttentionGeometry& g,
                           float weight, float* out, int64_t out_stride,
                           CpuAttentionScratch* scratch);

}  // namespace dllm

#endif  // DLLM_ENGINE_BACKEND_CPU_CPU_ATTENTION_H_
