// Bidirectional GQA attention of one query row over a K/V slab, on the host in fp32.
//
// For each query head h (kv head h / (heads / kv_heads)) the row streams over cached positions
// 0..kv_positions-1 in order with kernel_math's online softmax: no score matrix is formed,
// and the result depends only on the query row and the slab (not on other rows, other
// sequences or the thread that runs it).
#ifndef DLLM_ENGINE_BACKEND_CPU_CPU_ATTENTION_H_
#define DLLM_ENGINE_BACKEND_CPU_CPU_ATTENTION_H_

#include <cstdint>

namespace dllm {

struct CpuAttentionGeometry {
  int num_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
  float scale = 0;
};

// q: [num_heads * head_dim]; k_plane, v_plane: [>= kv_positions][num_kv_heads * head_dim];
// out: [num_heads * head_dim]; acc: head_dim floats of scratch.
void CpuAttentionRow(const float* q, const float* k_plane, const float* v_plane, int kv_positions,
                     const CpuAttentionGeometry& g, float* out, float* acc);

}  // namespace dllm

#endif  // DLLM_ENGINE_BACKEND_CPU_CPU_ATTENTION_H_
