// Device ceilings measured in the same run as a benchmark (scripts/gpu-check): the cuBLASLt
// bf16 GEMM rate and the device-to-device copy bandwidth. Timed with CUDA events after a
// warm-up; inputs are random bf16 generated on the device.
#ifndef DLLM_ENGINE_BACKEND_CUDA_CUDA_MICROBENCH_H_
#define DLLM_ENGINE_BACKEND_CUDA_CUDA_MICROBENCH_H_

#include <cstdint>

#include "absl/status/statusor.h"

namespace dllm {

// TFLOP/s (2*m*n*k per GEMM) of D[m, n] = A[m, k] · B[k, n] in bf16 with fp32 accumulation,
// cuBLASLt's first heuristic algorithm, averaged over `iterations` back-to-back calls.
absl::StatusOr<double> MeasureBf16GemmTflops(int m, int n, int k, int iterations);

// GB/s (read + write bytes / time) of cudaMemcpyAsync device to device of `bytes` bytes.
absl::StatusOr<double> MeasureDeviceCopyGBps(int64_t bytes, int iterations);

}  // namespace dllm

#endif  // DLLM_ENGINE_BACKEND_CUDA_CUDA_MICROBENCH_H_
