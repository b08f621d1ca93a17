// Bidirectional GQA attention of one query row over a K/V slab, on the host in fp32.
//
// For each kv head, the query heads it serves (heads / kv_heads of them) stream over the
// cached positions 0..kv_positions-1 together, in blocks of kAttentionBlock keys: scores of
// the block, then its softmax partial (block max, sum of exp, exp-weighted V sum), folded into
// the running state with kernel_math's OnlineSoftmaxMerge. No score matrix over the sequence
// is formed, and the arithmetic for a row depends only on the query row and the slab (not on
// other rows, other sequences or the thread that runs it).
#ifndef DLLM_ENGINE_BACKEND_CPU_CPU_ATTENTION_H_
#define DLLM_ENGINE_BACKEND_CPU_CPU_ATTENTION_H_

#include <cstdint>
#include <vector>

namespace dllm {

inline constexpr int kAttentionBlock = 32;

struct CpuAttentionGeometry {
  int num_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
  float scale = 0;
};

// q: [num_heads * head_dim]; k_plane, v_plane: [>= kv_positions][num_kv_heads * head_dim];
// out: [num_heads * head_dim]. `scratch` is resized as needed and may be reused.
void CpuAttentionRow(const float* q, const float* k_plane, const float* v_plane, int kv_positions,
                     const CpuAttentionGeometry& g, float* out, std::vector<float>* scratch);

}  // namespace dllm

#endif  // DLLM_ENGINE_BACKEND_CPU_CPU_ATTENTION_H_
