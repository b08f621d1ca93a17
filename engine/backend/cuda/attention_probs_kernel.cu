// Head-averaged attention probabilities of one sequence's query rows (Backend::
// AttentionProbabilities): the decision input of the d2cache and elastic cache policies, not a
// step-path kernel. The step path fuses them into attention instead (attention_kernels.cu
// stores the scores; AttentionProbsFinishKernel below normalizes them); this kernel stays as
// the independent second computation the GPU tests compare the fused values with.
//
// One block per query row. The heads run one after another inside the block, so every output
// element is owned by one thread and gets the heads' terms in the order 0, 1, ... (no atomics;
// the result is deterministic and depends only on the row's q and the slab). Per head the
// row's scores are kept in a global scratch row, so each q·k is computed once:
//   1. s_n = scale · q·k_n and the row max (block reduction);
//   2. e_n = exp(s_n - max) and their sum;
//   3. out_n += weight · e_n / sum, weight = 1 / heads.
// fp32 throughout (the CPU backend computes the same expression in fp32); the q row of the
// head is staged in shared memory as fp32.
#include <cuda_runtime.h>

#include <cstdint>

#include "engine/backend/cuda/bf16_vec.cuh"
#include "engine/backend/cuda/cuda_index_math.h"
#include "engine/backend/cuda/cuda_kernels.h"

namespace dllm {
namespace cuda {
namespace {

constexpr int kProbsThreads = 256;
constexpr int kProbsMaxHeadDim = 256;

// Reduces `v` over the block with `op`; every thread gets the result. `shared` holds one
// float per warp. Ends with a barrier, so `shared` may be reused right after.
template <typename Op>
__device__ float BlockReduce(float v, float* shared, Op op) {
  for (int offset = 16; offset > 0; offset >>= 1) {
    v = op(v, __shfl_xor_sync(0xffffffffu, v, offset));
  }
  const int warp = threadIdx.x >> 5;
  const int lane = threadIdx.x & 31;
  const int warps = blockDim.x >> 5;
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  float total = shared[0];
  for (int w = 1; w < warps; ++w) total = op(total, shared[w]);
  __syncthreads();
  return total;
}

struct MaxOp {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};
struct SumOp {
  __device__ float operator()(float a, float b) const { return a + b; }
};

__global__ void __launch_bounds__(kProbsThreads)
    AttentionProbsKernel(const uint16_t* __restrict__ q, SeqDesc seq, AttnParams p,
                         float* __restrict__ scratch, float* __restrict__ out) {
  __shared__ float q_s[kProbsMaxHeadDim];
  __shared__ float reduce_s[kProbsThreads / 32];
  const int r = blockIdx.x;
  const int d = p.head_dim;
  const int L = seq.kv_positions;
  const int q_width = p.num_heads * d;
  const int kv_width = p.num_kv_heads * d;
  const uint16_t* q_row = q + (static_cast<int64_t>(seq.row_begin) + r) * q_width;
  const uint16_t* k_plane =
      seq.kv + cuda_index::SlabRowOffset(p.layer, 0, 0, seq.capacity_positions, kv_width);
  float* s_row = scratch + static_cast<int64_t>(r) * L;
  float* o_row = out + static_cast<int64_t>(r) * L;
  const float weight = 1.0f / static_cast<float>(p.num_heads);
  for (int n = threadIdx.x; n < L; n += blockDim.x) o_row[n] = 0.0f;

  for (int head = 0; head < p.num_heads; ++head) {
    for (int i = threadIdx.x; i < d; i += blockDim.x) q_s[i] = Bf16BitsToFloat(q_row[head * d + i]);
    __syncthreads();
    const int kv_offset = cuda_index::KvHeadOf(head, p.num_heads, p.num_kv_heads) * d;
    float local_max = -INFINITY;
    for (int n = threadIdx.x; n < L; n += blockDim.x) {
      const uint16_t* k = k_plane + static_cast<int64_t>(n) * kv_width + kv_offset;
      float dot = 0.0f;
      for (int i = 0; i < d; ++i) dot = fmaf(q_s[i], Bf16BitsToFloat(k[i]), dot);
      const float s = dot * p.scale;
      s_row[n] = s;
      local_max = fmaxf(local_max, s);
    }
    const float row_max = BlockReduce(local_max, reduce_s, MaxOp{});
    float local_sum = 0.0f;
    for (int n = threadIdx.x; n < L; n += blockDim.x) {
      const float e = expf(s_row[n] - row_max);
      s_row[n] = e;
      local_sum += e;
    }
    const float row_sum = BlockReduce(local_sum, reduce_s, SumOp{});
    const float f = row_sum > 0.0f ? weight / row_sum : 0.0f;
    // Each thread reads back only the scratch elements it wrote itself: no barrier needed
    // between the passes beyond the reductions'.
    for (int n = threadIdx.x; n < L; n += blockDim.x) o_row[n] += f * s_row[n];
    // q_s is rewritten for the next head only after every thread's dot products are done.
    __syncthreads();
  }
}

// The fused path's second half: one thread per (row, position) of one sequence, the heads in
// order 0, 1, ... (deterministic), each term weight · exp(s - max) / sum as the separate
// kernel forms it, from the scores and softmax state the attention kernel stored.
__global__ void AttentionProbsFinishKernel(const float* __restrict__ scores, int num_heads,
                                           int rows, int kv_positions, float* __restrict__ out) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= static_cast<int64_t>(rows) * kv_positions) return;
  const int r = static_cast<int>(i / kv_positions);
  const int n = static_cast<int>(i % kv_positions);
  const float weight = 1.0f / static_cast<float>(num_heads);
  float total = 0.0f;
  for (int head = 0; head < num_heads; ++head) {
    const float* stats =
        scores + cuda_index::ScoreStatsIndex(head, r, num_heads, rows, kv_positions);
    const float f = stats[1] > 0.0f ? weight / stats[1] : 0.0f;
    total += f * expf(scores[cuda_index::ScoreIndex(head, r, n, rows, kv_positions)] - stats[0]);
  }
  out[i] = total;
}

}  // namespace

cudaError_t LaunchAttentionProbsFinish(const float* scores, int num_heads, int rows,
                                       int kv_positions, float* out, cudaStream_t stream) {
  const int64_t values = static_cast<int64_t>(rows) * kv_positions;
  if (values <= 0 || num_heads <= 0) return cudaSuccess;
  constexpr int kThreads = 256;
  const auto blocks = static_cast<unsigned>((values + kThreads - 1) / kThreads);
  AttentionProbsFinishKernel<<<blocks, kThreads, 0, stream>>>(scores, num_heads, rows, kv_positions,
                                                              out);
  return cudaGetLastError();
}

bool AttentionProbsSupportsHeadDim(int head_dim) {
  return head_dim > 0 && head_dim <= kProbsMaxHeadDim;
}

cudaError_t LaunchAttentionProbs(const uint16_t* q, const SeqDesc& seq, const AttnParams& params,
                                 float* scratch, float* out, cudaStream_t stream) {
  if (seq.rows <= 0 || seq.kv_positions <= 0 || params.num_heads <= 0) return cudaSuccess;
  AttentionProbsKernel<<<static_cast<unsigned>(seq.rows), kProbsThreads, 0, stream>>>(
      q, seq, params, scratch, out);
  return cudaGetLastError();
}

}  // namespace cuda
}  // namespace dllm
