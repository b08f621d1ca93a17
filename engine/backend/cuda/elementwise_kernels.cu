// Memory-bound kernels of the CUDA backend: row gathers, RMSNorm, RoPE, KV scatter, SwiGLU,
// residual add, random init and bf16 widening. The per-element math comes from
// kernel_math.h; these kernels only index and move data (16-byte vectors where rows allow).
#include <cuda_runtime.h>

#include <cstdint>

#include "engine/backend/counter_rng.h"
#include "engine/backend/cuda/bf16_vec.cuh"
#include "engine/backend/cuda/cuda_index_math.h"
#include "engine/backend/cuda/cuda_kernels.h"
#include "engine/backend/kernel_math.h"

namespace dllm {
namespace cuda {
namespace {

constexpr int kRowThreads = 256;
constexpr int kFlatThreads = 256;

int FlatBlocks(int64_t work_items) {
  int64_t blocks = (work_items + kFlatThreads - 1) / kFlatThreads;
  if (blocks > (int64_t{1} << 20)) blocks = int64_t{1} << 20;  // grid-stride beyond this
  return static_cast<int>(blocks < 1 ? 1 : blocks);
}

// ---- Gather -------------------------------------------------------------------------------

// dst[r] = src[idx[r]]; one block per row. Out-of-range indices give a zero row (callers
// validate; this only keeps a bug from reading outside the table).
__global__ void GatherRowsKernel(const uint16_t* __restrict__ src, int64_t src_rows, int cols,
                                 const int32_t* __restrict__ idx, uint16_t* __restrict__ dst) {
  const int r = blockIdx.x;
  const int32_t s = idx[r];
  const bool valid = s >= 0 && s < src_rows;
  const uint16_t* in = src + static_cast<int64_t>(valid ? s : 0) * cols;
  uint16_t* out = dst + static_cast<int64_t>(r) * cols;
  if (cuda_index::RowsVectorizable(cols)) {
    const int vecs = cols / 8;
    for (int i = threadIdx.x; i < vecs; i += blockDim.x) {
      uint4 value = make_uint4(0, 0, 0, 0);
      if (valid) value = reinterpret_cast<const uint4*>(in)[i];
      reinterpret_cast<uint4*>(out)[i] = value;
    }
  } else {
    for (int i = threadIdx.x; i < cols; i += blockDim.x) out[i] = valid ? in[i] : 0;
  }
}

// dst[idx[r]] = src[r]; one block per row (src already offset to its first row). Indices
// outside [0, dst_rows) write nothing (the host cannot see device-resident indices to reject
// them; callers build them from positions they validated).
__global__ void ScatterRowsKernel(const uint16_t* __restrict__ src, int cols,
                                  const int32_t* __restrict__ idx, int64_t dst_rows,
                                  uint16_t* __restrict__ dst) {
  const int r = blockIdx.x;
  const int32_t d = idx[r];
  if (d < 0 || d >= dst_rows) return;
  const uint16_t* in = src + static_cast<int64_t>(r) * cols;
  uint16_t* out = dst + static_cast<int64_t>(d) * cols;
  if (cuda_index::RowsVectorizable(cols)) {
    const int vecs = cols / 8;
    for (int i = threadIdx.x; i < vecs; i += blockDim.x) {
      reinterpret_cast<uint4*>(out)[i] = reinterpret_cast<const uint4*>(in)[i];
    }
  } else {
    for (int i = threadIdx.x; i < cols; i += blockDim.x) out[i] = in[i];
  }
}

// ---- RMSNorm ------------------------------------------------------------------------------

// One block per row. Pass 1: each thread sums the squares of its elements (strided, in index
// order), then a fixed-tree block sum. Pass 2: each thread rescales the same elements it read,
// so out may alias x.
__global__ void RmsNormKernel(const uint16_t* x, int cols, const uint16_t* __restrict__ weight,
                              float eps, uint16_t* out) {
  __shared__ float scratch[32];
  const int64_t base = static_cast<int64_t>(blockIdx.x) * cols;
  const uint16_t* in = x + base;
  uint16_t* o = out + base;
  const bool vec = cuda_index::RowsVectorizable(cols);
  float sum_squares = 0.0f;
  if (vec) {
    for (int i = threadIdx.x; i < cols / 8; i += blockDim.x) {
      const Vec8 a = LoadVec8(in + 8 * i);
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        sum_squares = kmath::AddRn(sum_squares, kmath::MulRn(a.v[e], a.v[e]));
      }
    }
  } else {
    for (int i = threadIdx.x; i < cols; i += blockDim.x) {
      const float a = Bf16BitsToFloat(in[i]);
      sum_squares = kmath::AddRn(sum_squares, kmath::MulRn(a, a));
    }
  }
  sum_squares = BlockSum(sum_squares, scratch);
  const float inv_rms = kmath::RmsInvRms(sum_squares, cols, eps);
  if (vec) {
    for (int i = threadIdx.x; i < cols / 8; i += blockDim.x) {
      const Vec8 a = LoadVec8(in + 8 * i);
      const Vec8 w = LoadVec8(weight + 8 * i);
      Vec8 y;
#pragma unroll
      for (int e = 0; e < 8; ++e) y.v[e] = kmath::RmsNormElementBf16(a.v[e], inv_rms, w.v[e]);
      StoreVec8(o + 8 * i, y);
    }
  } else {
    for (int i = threadIdx.x; i < cols; i += blockDim.x) {
      const float y =
          kmath::RmsNormElementBf16(Bf16BitsToFloat(in[i]), inv_rms, Bf16BitsToFloat(weight[i]));
      o[i] = FloatToBf16Bits(y);
    }
  }
}

// ---- RoPE ---------------------------------------------------------------------------------

// One thread per (row, head, pair j < head_dim/2), grid-stride.
__global__ void RopeKernel(uint16_t* x, int rows, int heads, int head_dim,
                           const int32_t* __restrict__ positions, float theta, bool bf16_rounded) {
  const int half = head_dim / 2;
  const int64_t total = static_cast<int64_t>(rows) * heads * half;
  for (int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; t < total;
       t += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int j = static_cast<int>(t % half);
    const int64_t row_head = t / half;  // row * heads + head
    const int row = static_cast<int>(row_head / heads);
    uint16_t* p = x + row_head * head_dim;
    const float inv_freq = kmath::RopeInvFreq(j, head_dim, theta);
    const float angle = kmath::RopeAngle(positions[row], inv_freq);
    float c = cosf(angle), s = sinf(angle);
    const float x0 = Bf16BitsToFloat(p[j]);
    const float x1 = Bf16BitsToFloat(p[j + half]);
    float y0, y1;
    if (bf16_rounded) {
      c = kmath::RoundBf16(c);
      s = kmath::RoundBf16(s);
      kmath::RopeRotatePairBf16(x0, x1, c, s, &y0, &y1);
    } else {
      kmath::RopeRotatePair(x0, x1, c, s, &y0, &y1);
    }
    p[j] = FloatToBf16Bits(y0);
    p[j + half] = FloatToBf16Bits(y1);
  }
}

// ---- KV scatter ---------------------------------------------------------------------------

// grid (max_rows, num_seqs): block (r, s) copies row r of sequence s (if present) into the
// slab at positions[row_begin + r], K and V planes of `layer`.
__global__ void KvScatterKernel(const uint16_t* __restrict__ k, const uint16_t* __restrict__ v,
                                const int32_t* __restrict__ positions,
                                const SeqDesc* __restrict__ seqs, int kv_width, int layer) {
  const SeqDesc seq = seqs[blockIdx.y];
  const int r = blockIdx.x;
  if (r >= seq.rows) return;
  const int row = seq.row_begin + r;
  const int pos = positions[row];
  if (pos < 0 || pos >= seq.capacity_positions) return;  // validated by the caller
  const uint16_t* k_in = k + static_cast<int64_t>(row) * kv_width;
  const uint16_t* v_in = v + static_cast<int64_t>(row) * kv_width;
  uint16_t* k_out =
      seq.kv + cuda_index::SlabRowOffset(layer, 0, pos, seq.capacity_positions, kv_width);
  uint16_t* v_out =
      seq.kv + cuda_index::SlabRowOffset(layer, 1, pos, seq.capacity_positions, kv_width);
  if (cuda_index::RowsVectorizable(kv_width)) {
    const int vecs = kv_width / 8;
    for (int i = threadIdx.x; i < vecs; i += blockDim.x) {
      reinterpret_cast<uint4*>(k_out)[i] = reinterpret_cast<const uint4*>(k_in)[i];
      reinterpret_cast<uint4*>(v_out)[i] = reinterpret_cast<const uint4*>(v_in)[i];
    }
  } else {
    for (int i = threadIdx.x; i < kv_width; i += blockDim.x) {
      k_out[i] = k_in[i];
      v_out[i] = v_in[i];
    }
  }
}

// ---- SwiGLU / Add -------------------------------------------------------------------------

// Vector part: elements [0, 8 * vecs); the scalar tail is handled by the same kernel's
// threads afterwards. out may alias gate or up (each element is read before it is written by
// the same thread).
__global__ void SwiGluKernel(const uint16_t* gate, const uint16_t* up, int64_t elements,
                             uint16_t* out) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t first = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  const int64_t vecs = elements / 8;
  for (int64_t i = first; i < vecs; i += stride) {
    const Vec8 g = LoadVec8(gate + 8 * i);
    const Vec8 u = LoadVec8(up + 8 * i);
    Vec8 y;
#pragma unroll
    for (int e = 0; e < 8; ++e) y.v[e] = kmath::SwiGluElementBf16(g.v[e], u.v[e]);
    StoreVec8(out + 8 * i, y);
  }
  for (int64_t i = 8 * vecs + first; i < elements; i += stride) {
    out[i] =
        FloatToBf16Bits(kmath::SwiGluElementBf16(Bf16BitsToFloat(gate[i]), Bf16BitsToFloat(up[i])));
  }
}

__global__ void AddKernel(const uint16_t* x, int64_t elements, uint16_t* y) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t first = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  const int64_t vecs = elements / 8;
  for (int64_t i = first; i < vecs; i += stride) {
    const Vec8 a = LoadVec8(x + 8 * i);
    Vec8 b = LoadVec8(y + 8 * i);
#pragma unroll
    for (int e = 0; e < 8; ++e) b.v[e] = kmath::AddRn(a.v[e], b.v[e]);
    StoreVec8(y + 8 * i, b);
  }
  for (int64_t i = 8 * vecs + first; i < elements; i += stride) {
    y[i] = FloatToBf16Bits(kmath::AddRn(Bf16BitsToFloat(x[i]), Bf16BitsToFloat(y[i])));
  }
}

// ---- Random init / widening ---------------------------------------------------------------

constexpr uint32_t kRngDomainInit = 0x696e6974u;  // "init"

__global__ void RandomBf16Kernel(uint16_t* dst, int64_t elements, uint64_t seed, float scale,
                                 float offset) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t b = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; b * 4 < elements;
       b += stride) {
    const Philox4x32 r = CounterRandomBlock(seed, static_cast<int32_t>(b & 0xffffffff),
                                            static_cast<int32_t>(b >> 32), 0u, kRngDomainInit);
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int64_t i = b * 4 + e;
      if (i < elements) {
        const float u = UniformFromBits(r.v[e]);
        dst[i] = FloatToBf16Bits(offset + scale * (2.0f * u - 1.0f));
      }
    }
  }
}

__global__ void Bf16ToFloatKernel(const uint16_t* src, int64_t elements, float* dst) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < elements;
       i += stride) {
    dst[i] = Bf16BitsToFloat(src[i]);
  }
}

}  // namespace

cudaError_t LaunchGatherRows(const uint16_t* src, int64_t src_rows, int cols,
                             const int32_t* row_indices, int rows, uint16_t* dst,
                             cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return cudaSuccess;
  GatherRowsKernel<<<rows, 128, 0, stream>>>(src, src_rows, cols, row_indices, dst);
  return cudaGetLastError();
}

cudaError_t LaunchScatterRows(const uint16_t* src, int cols, const int32_t* row_indices, int rows,
                              int64_t dst_rows, uint16_t* dst, cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return cudaSuccess;
  ScatterRowsKernel<<<rows, 128, 0, stream>>>(src, cols, row_indices, dst_rows, dst);
  return cudaGetLastError();
}

cudaError_t LaunchRmsNorm(const uint16_t* x, int rows, int cols, const uint16_t* weight, float eps,
                          uint16_t* out, cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return cudaSuccess;
  RmsNormKernel<<<rows, kRowThreads, 0, stream>>>(x, cols, weight, eps, out);
  return cudaGetLastError();
}

cudaError_t LaunchRope(uint16_t* x, int rows, int heads, int head_dim, const int32_t* positions,
                       float theta, bool bf16_rounded, cudaStream_t stream) {
  const int64_t work = static_cast<int64_t>(rows) * heads * (head_dim / 2);
  if (work <= 0) return cudaSuccess;
  RopeKernel<<<FlatBlocks(work), kFlatThreads, 0, stream>>>(x, rows, heads, head_dim, positions,
                                                            theta, bf16_rounded);
  return cudaGetLastError();
}

cudaError_t LaunchKvScatter(const uint16_t* k, const uint16_t* v, const int32_t* positions,
                            const SeqDesc* seqs, int num_seqs, int max_rows, int kv_width,
                            int layer, cudaStream_t stream) {
  if (num_seqs <= 0 || max_rows <= 0 || kv_width <= 0) return cudaSuccess;
  const dim3 grid(static_cast<unsigned>(max_rows), static_cast<unsigned>(num_seqs));
  KvScatterKernel<<<grid, 128, 0, stream>>>(k, v, positions, seqs, kv_width, layer);
  return cudaGetLastError();
}

cudaError_t LaunchSwiGlu(const uint16_t* gate, const uint16_t* up, int64_t elements, uint16_t* out,
                         cudaStream_t stream) {
  if (elements <= 0) return cudaSuccess;
  SwiGluKernel<<<FlatBlocks((elements + 7) / 8), kFlatThreads, 0, stream>>>(gate, up, elements,
                                                                            out);
  return cudaGetLastError();
}

cudaError_t LaunchAdd(const uint16_t* x, int64_t elements, uint16_t* y, cudaStream_t stream) {
  if (elements <= 0) return cudaSuccess;
  AddKernel<<<FlatBlocks((elements + 7) / 8), kFlatThreads, 0, stream>>>(x, elements, y);
  return cudaGetLastError();
}

cudaError_t LaunchRandomBf16(uint16_t* dst, int64_t elements, uint64_t seed, float scale,
                             float offset, cudaStream_t stream) {
  if (elements <= 0) return cudaSuccess;
  RandomBf16Kernel<<<FlatBlocks((elements + 3) / 4), kFlatThreads, 0, stream>>>(dst, elements, seed,
                                                                                scale, offset);
  return cudaGetLastError();
}

cudaError_t LaunchBf16ToFloat(const uint16_t* src, int64_t elements, float* dst,
                              cudaStream_t stream) {
  if (elements <= 0) return cudaSuccess;
  Bf16ToFloatKernel<<<FlatBlocks(elements), kFlatThreads, 0, stream>>>(src, elements, dst);
  return cudaGetLastError();
}

}  // namespace cuda
}  // namespace dllm
