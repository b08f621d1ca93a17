// DLLM_HD: marks small inline math that both the CPU backend and CUDA kernels call.
//
// Under nvcc it expands to `__host__ __device__`, elsewhere to nothing, so the same function
// body is compiled for host tests and for device kernels.
#ifndef DLLM_ENGINE_BACKEND_DEVICE_INLINE_H_
#define DLLM_ENGINE_BACKEND_DEVICE_INLINE_H_

#if defined(__CUDACC__)
#define DLLM_HD __host__ __device__
#else
#define DLLM_HD
#endif

#endif  // DLLM_ENGINE_BACKEND_DEVICE_INLINE_H_
