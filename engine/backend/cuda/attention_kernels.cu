// Ragged bidirectional attention of each sequence's query rows over its whole KV slab.
//
// Online softmax (kernel_math's OnlineSoftmaxMerge), so no score matrix of the sequence is
// ever stored: only one 64-key tile of scores per warp lives in shared memory.
//
// Tensor-core kernel (head_dim 64 or 128): one block per (query tile of 64 rows of one
// sequence, query head), four warps, 16 query rows per warp. Per 64-key tile the block stages
// K and V of the head's kv head in shared memory (16-byte loads, zero rows past
// kv_positions); each warp computes S = Q·Kᵀ with bf16 WMMA (fp32 accumulate), folds the
// tile into its rows' online-softmax state (fp32; P rounded to bf16 for P·V, as the flash
// kernels the reference runs do), computes P·V with WMMA and rescales its fp32 output
// accumulator (registers: lane pair (2r, 2r+1) owns row r, each lane half the columns).
//
// Generic kernel (any head_dim <= 256, used by the tiny test models): one thread per
// (query row, head), streaming over positions exactly like the CPU backend, fp32 accumulator
// in shared memory.
//
// Both compute each (row, head) from that row's q and the slab only (batch invariance).
//
// Fused attention probabilities (SeqDesc::scores not null: d2Cache's and Elastic-Cache's
// decision input): the scaled score of each key is stored as the softmax pass computes it, and
// the row's final softmax max and sum at the end, so the probabilities need no second q·k
// pass; LaunchAttentionProbsFinish normalizes and averages the heads in a small elementwise
// kernel. A sequence without it pays one predictable branch per tile.
#include <cuda_runtime.h>
#include <mma.h>

#include <cstdint>

#include "engine/backend/cuda/bf16_vec.cuh"
#include "engine/backend/cuda/cuda_index_math.h"
#include "engine/backend/cuda/cuda_kernels.h"
#include "engine/backend/kernel_math.h"

namespace dllm {
namespace cuda {
namespace {

namespace wmma = nvcuda::wmma;

template <int D>
struct WmmaAttn {
  static constexpr int kWarps = 4;
  static constexpr int kThreads = kWarps * 32;
  static constexpr int kRowsPerWarp = 16;
  static constexpr int kTileRows = kWarps * kRowsPerWarp;  // query rows per block
  static constexpr int kKeys = 64;                         // keys per K/V tile
  static constexpr int kLdKv = D + 8;                      // bf16 elements (pad: banks)
  static constexpr int kLdQ = D + 8;
  static constexpr int kLdF = D + 4;  // fp32 scratch: S uses cols [0, 64), P·V cols [0, D)
  static constexpr int kLdP = kKeys + 8;
  static constexpr int kKvBytes = kKeys * kLdKv * 2;
  static constexpr int kQBytes = kTileRows * kLdQ * 2;
  static constexpr int kFBytes = kTileRows * kLdF * 4;
  static constexpr int kPBytes = kTileRows * kLdP * 2;
  static constexpr int kSmemBytes = 2 * kKvBytes + kQBytes + kFBytes + kPBytes;
  static constexpr int kVecsPerRow = D / 8;
  static constexpr int kHalfD = D / 2;
  static_assert(D % 16 == 0 && kLdF >= kKeys, "tile geometry");
  static_assert(kKvBytes % 128 == 0 && kQBytes % 128 == 0 && kFBytes % 128 == 0,
                "shared-memory sub-buffers stay 128-byte aligned");
};

template <int D>
__global__ void __launch_bounds__(WmmaAttn<D>::kThreads)
    AttentionWmmaKernel(const uint16_t* __restrict__ q, const SeqDesc* __restrict__ seqs,
                        const AttnTile* __restrict__ tiles, AttnParams p,
                        uint16_t* __restrict__ out) {
  using C = WmmaAttn<D>;
  extern __shared__ __align__(128) unsigned char smem[];
  bf16* k_s = reinterpret_cast<bf16*>(smem);
  bf16* v_s = reinterpret_cast<bf16*>(smem + C::kKvBytes);
  bf16* q_s = reinterpret_cast<bf16*>(smem + 2 * C::kKvBytes);
  float* f_s = reinterpret_cast<float*>(smem + 2 * C::kKvBytes + C::kQBytes);
  bf16* p_s = reinterpret_cast<bf16*>(smem + 2 * C::kKvBytes + C::kQBytes + C::kFBytes);

  const AttnTile tile = tiles[blockIdx.x];
  const SeqDesc seq = seqs[tile.seq];
  const int head = blockIdx.y;
  const int kv_head = cuda_index::KvHeadOf(head, p.num_heads, p.num_kv_heads);
  const int q_width = p.num_heads * D;
  const int kv_width = p.num_kv_heads * D;
  const int warp = threadIdx.x >> 5;
  const int lane = threadIdx.x & 31;
  const int tile_rows = cuda_index::TileRows(seq.rows, C::kTileRows, tile.row0 / C::kTileRows);
  const int64_t first_row = static_cast<int64_t>(seq.row_begin) + tile.row0;

  // Stage this tile's query rows of `head` (zeros past the sequence's rows).
  for (int i = threadIdx.x; i < C::kTileRows * C::kVecsPerRow; i += C::kThreads) {
    const int r = i / C::kVecsPerRow;
    const int c = (i % C::kVecsPerRow) * 8;
    uint4 value = make_uint4(0, 0, 0, 0);
    if (r < tile_rows) {
      value = *reinterpret_cast<const uint4*>(q + (first_row + r) * q_width + head * D + c);
    }
    *reinterpret_cast<uint4*>(q_s + r * C::kLdQ + c) = value;
  }
  __syncthreads();

  const bool warp_active = warp * C::kRowsPerWarp < tile_rows;
  bf16* q_w = q_s + warp * C::kRowsPerWarp * C::kLdQ;
  float* f_w = f_s + warp * C::kRowsPerWarp * C::kLdF;
  bf16* p_w = p_s + warp * C::kRowsPerWarp * C::kLdP;

  wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::row_major> q_frag[D / 16];
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk) wmma::load_matrix_sync(q_frag[kk], q_w + kk * 16, C::kLdQ);

  // Lane pair (2r, 2r+1) owns query row r of the warp; lane half h owns output columns
  // [h*D/2, (h+1)*D/2) and score columns 2c+h.
  const int my_row = lane >> 1;
  const int my_half = lane & 1;
  const int row_in_tile = warp * C::kRowsPerWarp + my_row;
  kmath::OnlineSoftmax state;
  float acc[C::kHalfD];
#pragma unroll
  for (int c = 0; c < C::kHalfD; ++c) acc[c] = 0.0f;

  const uint16_t* k_plane =
      seq.kv + cuda_index::SlabRowOffset(p.layer, 0, 0, seq.capacity_positions, kv_width);
  const uint16_t* v_plane =
      seq.kv + cuda_index::SlabRowOffset(p.layer, 1, 0, seq.capacity_positions, kv_width);

  for (int kv0 = 0; kv0 < seq.kv_positions; kv0 += C::kKeys) {
    const int valid_keys = min(C::kKeys, seq.kv_positions - kv0);
    __syncthreads();  // the previous tile's K/V are no longer read
    for (int i = threadIdx.x; i < C::kKeys * C::kVecsPerRow; i += C::kThreads) {
      const int n = i / C::kVecsPerRow;
      const int c = (i % C::kVecsPerRow) * 8;
      uint4 kv = make_uint4(0, 0, 0, 0), vv = make_uint4(0, 0, 0, 0);
      if (n < valid_keys) {
        const int64_t off = static_cast<int64_t>(kv0 + n) * kv_width + kv_head * D + c;
        kv = *reinterpret_cast<const uint4*>(k_plane + off);
        vv = *reinterpret_cast<const uint4*>(v_plane + off);
      }
      *reinterpret_cast<uint4*>(k_s + n * C::kLdKv + c) = kv;
      *reinterpret_cast<uint4*>(v_s + n * C::kLdKv + c) = vv;
    }
    __syncthreads();
    if (!warp_active) continue;

      // S[16, 64] = Q_w · K_tileᵀ. K stored [key][dim] is Kᵀ in column-major order.
#pragma unroll
    for (int j = 0; j < C::kKeys / 16; ++j) {
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> s_frag;
      wmma::fill_fragment(s_frag, 0.0f);
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk) {
        wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::col_major> k_frag;
        wmma::load_matrix_sync(k_frag, k_s + (j * 16) * C::kLdKv + kk * 16, C::kLdKv);
        wmma::mma_sync(s_frag, q_frag[kk], k_frag, s_frag);
      }
      wmma::store_matrix_sync(f_w + j * 16, s_frag, C::kLdF, wmma::mem_row_major);
    }
    __syncwarp();

    // Online softmax over this tile for row my_row: tile max, exp relative to it (rounded to
    // bf16 into P), tile sum; then merge into the running state.
    const float* s_row = f_w + my_row * C::kLdF;
    float tile_max = -INFINITY;
#pragma unroll
    for (int c = 0; c < C::kKeys / 2; ++c) {
      const int col = 2 * c + my_half;
      if (col < valid_keys) tile_max = fmaxf(tile_max, kmath::MulRn(s_row[col], p.scale));
    }
    if (seq.scores != nullptr && row_in_tile < tile_rows) {
      float* scores_row = seq.scores + cuda_index::ScoreIndex(head, tile.row0 + row_in_tile, kv0,
                                                              seq.rows, seq.kv_positions);
      for (int c = 0; c < C::kKeys / 2; ++c) {
        const int col = 2 * c + my_half;
        if (col < valid_keys) scores_row[col] = kmath::MulRn(s_row[col], p.scale);
      }
    }
    tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 1));
    float tile_sum = 0.0f;
    bf16* p_row = p_w + my_row * C::kLdP;
#pragma unroll
    for (int c = 0; c < C::kKeys / 2; ++c) {
      const int col = 2 * c + my_half;
      float e = 0.0f;
      if (col < valid_keys) e = expf(kmath::MulRn(s_row[col], p.scale) - tile_max);
      const bf16 e16 = __float2bfloat16_rn(e);
      p_row[col] = e16;
      tile_sum = kmath::AddRn(tile_sum, e);
    }
    tile_sum = kmath::AddRn(tile_sum, __shfl_xor_sync(0xffffffffu, tile_sum, 1));
    kmath::OnlineSoftmax tile_state;
    tile_state.max = tile_max;
    tile_state.sum = tile_sum;
    float scale_old, scale_new;
    kmath::OnlineSoftmaxMerge(&state, tile_state, &scale_old, &scale_new);
    __syncwarp();

    // PV[16, D] = P · V_tile, written over the S scratch (fully consumed above).
    wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::row_major> p_frag[C::kKeys / 16];
#pragma unroll
    for (int kk = 0; kk < C::kKeys / 16; ++kk) {
      wmma::load_matrix_sync(p_frag[kk], p_w + kk * 16, C::kLdP);
    }
    __syncwarp();
#pragma unroll
    for (int j = 0; j < D / 16; ++j) {
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> o_frag;
      wmma::fill_fragment(o_frag, 0.0f);
#pragma unroll
      for (int kk = 0; kk < C::kKeys / 16; ++kk) {
        wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::row_major> v_frag;
        wmma::load_matrix_sync(v_frag, v_s + (kk * 16) * C::kLdKv + j * 16, C::kLdKv);
        wmma::mma_sync(o_frag, p_frag[kk], v_frag, o_frag);
      }
      wmma::store_matrix_sync(f_w + j * 16, o_frag, C::kLdF, wmma::mem_row_major);
    }
    __syncwarp();
    const float* pv_row = f_w + my_row * C::kLdF + my_half * C::kHalfD;
#pragma unroll
    for (int c = 0; c < C::kHalfD; ++c) {
      acc[c] = kmath::AddRn(kmath::MulRn(acc[c], scale_old), kmath::MulRn(pv_row[c], scale_new));
    }
    __syncwarp();
  }

  if (warp_active && row_in_tile < tile_rows) {
    if (seq.scores != nullptr && my_half == 0) {
      float* stats =
          seq.scores + cuda_index::ScoreStatsIndex(head, tile.row0 + row_in_tile, p.num_heads,
                                                   seq.rows, seq.kv_positions);
      stats[0] = state.max;
      stats[1] = state.sum;
    }
    const float inv = state.sum > 0.0f ? 1.0f / state.sum : 0.0f;
    uint16_t* o = out + (first_row + row_in_tile) * q_width + head * D + my_half * C::kHalfD;
#pragma unroll
    for (int c = 0; c < C::kHalfD; c += 8) {
      Vec8 y;
#pragma unroll
      for (int e = 0; e < 8; ++e) y.v[e] = kmath::MulRn(acc[c + e], inv);
      StoreVec8(o + c, y);
    }
  }
}

// ---- Generic fallback ---------------------------------------------------------------------

constexpr int kGenericTileRows = 32;
constexpr int kGenericMaxHeadDim = 256;

// Block (tile, head), one thread per query row of the tile; the fp32 accumulator of thread t
// is acc_s[t * head_dim .. +head_dim) in shared memory.
__global__ void __launch_bounds__(kGenericTileRows)
    AttentionGenericKernel(const uint16_t* __restrict__ q, const SeqDesc* __restrict__ seqs,
                           const AttnTile* __restrict__ tiles, AttnParams p,
                           uint16_t* __restrict__ out) {
  extern __shared__ float acc_s[];
  const AttnTile tile = tiles[blockIdx.x];
  const SeqDesc seq = seqs[tile.seq];
  const int head = blockIdx.y;
  const int d = p.head_dim;
  const int r = tile.row0 + threadIdx.x;
  if (r >= seq.rows) return;
  const int q_width = p.num_heads * d;
  const int kv_width = p.num_kv_heads * d;
  const int kv_offset = cuda_index::KvHeadOf(head, p.num_heads, p.num_kv_heads) * d;
  const int64_t row = static_cast<int64_t>(seq.row_begin) + r;
  const uint16_t* qh = q + row * q_width + head * d;
  const uint16_t* k_plane =
      seq.kv + cuda_index::SlabRowOffset(p.layer, 0, 0, seq.capacity_positions, kv_width);
  const uint16_t* v_plane =
      seq.kv + cuda_index::SlabRowOffset(p.layer, 1, 0, seq.capacity_positions, kv_width);
  float* acc = acc_s + threadIdx.x * d;
  for (int i = 0; i < d; ++i) acc[i] = 0.0f;
  kmath::OnlineSoftmax state;
  for (int n = 0; n < seq.kv_positions; ++n) {
    const uint16_t* kn = k_plane + static_cast<int64_t>(n) * kv_width + kv_offset;
    float dot = 0.0f;
    for (int i = 0; i < d; ++i) {
      dot = kmath::AddRn(dot, kmath::MulRn(Bf16BitsToFloat(qh[i]), Bf16BitsToFloat(kn[i])));
    }
    float rescale, weight;
    const float score = kmath::MulRn(dot, p.scale);
    if (seq.scores != nullptr) {
      seq.scores[cuda_index::ScoreIndex(head, r, n, seq.rows, seq.kv_positions)] = score;
    }
    kmath::OnlineSoftmaxAdd(&state, score, &rescale, &weight);
    const uint16_t* vn = v_plane + static_cast<int64_t>(n) * kv_width + kv_offset;
    for (int i = 0; i < d; ++i) {
      acc[i] =
          kmath::AddRn(kmath::MulRn(acc[i], rescale), kmath::MulRn(weight, Bf16BitsToFloat(vn[i])));
    }
  }
  if (seq.scores != nullptr) {
    float* stats =
        seq.scores + cuda_index::ScoreStatsIndex(head, r, p.num_heads, seq.rows, seq.kv_positions);
    stats[0] = state.max;
    stats[1] = state.sum;
  }
  const float inv = state.sum > 0.0f ? 1.0f / state.sum : 0.0f;
  uint16_t* o = out + row * q_width + head * d;
  for (int i = 0; i < d; ++i) o[i] = FloatToBf16Bits(kmath::MulRn(acc[i], inv));
}

bool UsesWmma(int head_dim) { return head_dim == 64 || head_dim == 128; }

}  // namespace

int AttentionTileRows(int head_dim) {
  if (head_dim == 64) return WmmaAttn<64>::kTileRows;
  if (head_dim == 128) return WmmaAttn<128>::kTileRows;
  return kGenericTileRows;
}

bool AttentionSupportsHeadDim(int head_dim) {
  return head_dim > 0 && head_dim % 2 == 0 && head_dim <= kGenericMaxHeadDim;
}

cudaError_t InitKernelAttributes() {
  cudaError_t err =
      cudaFuncSetAttribute(AttentionWmmaKernel<64>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                           WmmaAttn<64>::kSmemBytes);
  if (err != cudaSuccess) return err;
  err = cudaFuncSetAttribute(AttentionWmmaKernel<128>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             WmmaAttn<128>::kSmemBytes);
  if (err != cudaSuccess) return err;
  return cudaFuncSetAttribute(AttentionGenericKernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                              kGenericTileRows * kGenericMaxHeadDim * 4);
}

cudaError_t LaunchAttention(const uint16_t* q, const SeqDesc* seqs, const AttnTile* tiles,
                            int num_tiles, const AttnParams& params, uint16_t* out,
                            cudaStream_t stream) {
  if (num_tiles <= 0 || params.num_heads <= 0) return cudaSuccess;
  const dim3 grid(static_cast<unsigned>(num_tiles), static_cast<unsigned>(params.num_heads));
  if (UsesWmma(params.head_dim)) {
    if (params.head_dim == 64) {
      AttentionWmmaKernel<64><<<grid, WmmaAttn<64>::kThreads, WmmaAttn<64>::kSmemBytes, stream>>>(
          q, seqs, tiles, params, out);
    } else {
      AttentionWmmaKernel<128>
          <<<grid, WmmaAttn<128>::kThreads, WmmaAttn<128>::kSmemBytes, stream>>>(q, seqs, tiles,
                                                                                 params, out);
    }
  } else {
    const size_t smem = static_cast<size_t>(kGenericTileRows) * params.head_dim * sizeof(float);
    AttentionGenericKernel<<<grid, kGenericTileRows, smem, stream>>>(q, seqs, tiles, params, out);
  }
  return cudaGetLastError();
}

}  // namespace cuda
}  // namespace dllm
