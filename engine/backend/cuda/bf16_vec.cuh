// Device helpers: 16-byte vectors of eight bf16 values and block-wide reductions.
#ifndef DLLM_ENGINE_BACKEND_CUDA_BF16_VEC_CUH_
#define DLLM_ENGINE_BACKEND_CUDA_BF16_VEC_CUH_

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace dllm {
namespace cuda {

using bf16 = __nv_bfloat16;

__device__ __forceinline__ float Bf16BitsToFloat(uint16_t bits) {
  return __uint_as_float(static_cast<uint32_t>(bits) << 16);
}

__device__ __forceinline__ uint16_t FloatToBf16Bits(float f) {
  const bf16 h = __float2bfloat16_rn(f);
  return *reinterpret_cast<const uint16_t*>(&h);
}

// Eight bf16 widened to fp32. `p` must be 16-byte aligned.
struct Vec8 {
  float v[8];
};

__device__ __forceinline__ Vec8 LoadVec8(const uint16_t* p) {
  const uint4 raw = *reinterpret_cast<const uint4*>(p);
  const uint32_t words[4] = {raw.x, raw.y, raw.z, raw.w};
  Vec8 out;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    out.v[2 * i] = __uint_as_float(words[i] << 16);
    out.v[2 * i + 1] = __uint_as_float(words[i] & 0xffff0000u);
  }
  return out;
}

__device__ __forceinline__ void StoreVec8(uint16_t* p, const Vec8& in) {
  uint32_t words[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    words[i] = static_cast<uint32_t>(FloatToBf16Bits(in.v[2 * i])) |
               (static_cast<uint32_t>(FloatToBf16Bits(in.v[2 * i + 1])) << 16);
  }
  *reinterpret_cast<uint4*>(p) = make_uint4(words[0], words[1], words[2], words[3]);
}

// Sum over the block in a fixed tree order (the result depends only on the per-thread
// values, not on scheduling). All threads get the result. `scratch` holds 32 floats.
__device__ __forceinline__ float BlockSum(float value, float* scratch) {
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int warps = (blockDim.x + 31) >> 5;
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    value = __fadd_rn(value, __shfl_down_sync(0xffffffffu, value, offset));
  }
  __syncthreads();  // scratch may still be read by a previous call
  if (lane == 0) scratch[warp] = value;
  __syncthreads();
  if (warp == 0) {
    value = lane < warps ? scratch[lane] : 0.0f;
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) {
      value = __fadd_rn(value, __shfl_down_sync(0xffffffffu, value, offset));
    }
    if (lane == 0) scratch[0] = value;
  }
  __syncthreads();
  return scratch[0];
}

__device__ __forceinline__ float BlockMax(float value, float* scratch) {
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int warps = (blockDim.x + 31) >> 5;
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    value = fmaxf(value, __shfl_down_sync(0xffffffffu, value, offset));
  }
  __syncthreads();
  if (lane == 0) scratch[warp] = value;
  __syncthreads();
  if (warp == 0) {
    value = lane < warps ? scratch[lane] : -INFINITY;
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) {
      value = fmaxf(value, __shfl_down_sync(0xffffffffu, value, offset));
    }
    if (lane == 0) scratch[0] = value;
  }
  __syncthreads();
  return scratch[0];
}

}  // namespace cuda
}  // namespace dllm

#endif  // DLLM_ENGINE_BACKEND_CUDA_BF16_VEC_CUH_
