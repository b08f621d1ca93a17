#include "engine/backend/cuda/cuda_microbench.h"

#include <cublasLt.h>
#include <cuda_runtime.h>

#include "absl/status/status.h"
#include "engine/backend/cuda/cuda_check.h"
#include "engine/backend/cuda/cuda_kernels.h"

namespace dllm {
namespace {

// Frees whatever was created, on every path.
struct Resources {
  cudaStream_t stream = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;
  void* a = nullptr;
  void* b = nullptr;
  void* c = nullptr;
  void* workspace = nullptr;
  cublasLtHandle_t handle = nullptr;
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, lc = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  ~Resources() {
    if (stream != nullptr) cudaStreamSynchronize(stream);
    if (pref != nullptr) cublasLtMatmulPreferenceDestroy(pref);
    if (la != nullptr) cublasLtMatrixLayoutDestroy(la);
    if (lb != nullptr) cublasLtMatrixLayoutDestroy(lb);
    if (lc != nullptr) cublasLtMatrixLayoutDestroy(lc);
    if (desc != nullptr) cublasLtMatmulDescDestroy(desc);
    if (handle != nullptr) cublasLtDestroy(handle);
    cudaFree(a);
    cudaFree(b);
    cudaFree(c);
    cudaFree(workspace);
    if (start != nullptr) cudaEventDestroy(start);
    if (stop != nullptr) cudaEventDestroy(stop);
    if (stream != nullptr) cudaStreamDestroy(stream);
  }
};

}  // namespace

absl::StatusOr<double> MeasureBf16GemmTflops(int m, int n, int k, int iterations) {
  if (m <= 0 || n <= 0 || k <= 0 || iterations <= 0) {
    return absl::InvalidArgumentError("MeasureBf16GemmTflops: bad arguments");
  }
  Resources r;
  const size_t ws_bytes = size_t{32} << 20;
  DLLM_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&r.stream, cudaStreamNonBlocking));
  DLLM_CUDA_RETURN_IF_ERROR(cudaEventCreate(&r.start));
  DLLM_CUDA_RETURN_IF_ERROR(cudaEventCreate(&r.stop));
  DLLM_CUDA_RETURN_IF_ERROR(cudaMalloc(&r.a, size_t{2} * m * k));
  DLLM_CUDA_RETURN_IF_ERROR(cudaMalloc(&r.b, size_t{2} * k * n));
  DLLM_CUDA_RETURN_IF_ERROR(cudaMalloc(&r.c, size_t{2} * m * n));
  DLLM_CUDA_RETURN_IF_ERROR(cudaMalloc(&r.workspace, ws_bytes));
  DLLM_CUDA_RETURN_IF_ERROR(cuda::LaunchRandomBf16(static_cast<uint16_t*>(r.a), int64_t{m} * k, 1,
                                                   0.05f, 0.0f, r.stream));
  DLLM_CUDA_RETURN_IF_ERROR(
      cuda::LaunchRandomBf16(static_cast<uint16_t*>(r.b), int64_t{k} * n, 2, 1.0f, 0.0f, r.stream));
  DLLM_CUBLAS_RETURN_IF_ERROR(cublasLtCreate(&r.handle));
  DLLM_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulDescCreate(&r.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t op_t = CUBLAS_OP_T;
  DLLM_CUBLAS_RETURN_IF_ERROR(
      cublasLtMatmulDescSetAttribute(r.desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_t, sizeof op_t));
  // Same orientation as the backend's GEMMs: A stored [m, k] row-major, used transposed.
  DLLM_CUBLAS_RETURN_IF_ERROR(cublasLtMatrixLayoutCreate(&r.la, CUDA_R_16BF, k, m, k));
  DLLM_CUBLAS_RETURN_IF_ERROR(cublasLtMatrixLayoutCreate(&r.lb, CUDA_R_16BF, k, n, k));
  DLLM_CUBLAS_RETURN_IF_ERROR(cublasLtMatrixLayoutCreate(&r.lc, CUDA_R_16BF, m, n, m));
  DLLM_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulPreferenceCreate(&r.pref));
  const uint64_t ws = ws_bytes;
  DLLM_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulPreferenceSetAttribute(
      r.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
  cublasLtMatmulHeuristicResult_t result{};
  int returned = 0;
  DLLM_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulAlgoGetHeuristic(r.handle, r.desc, r.la, r.lb, r.lc,
                                                             r.lc, r.pref, 1, &result, &returned));
  if (returned < 1) return absl::InternalError("cuBLASLt offers no bf16 algorithm");
  const float alpha = 1.0f, beta = 0.0f;
  auto run = [&]() {
    return cublasLtMatmul(r.handle, r.desc, &alpha, r.a, r.la, r.b, r.lb, &beta, r.c, r.lc, r.c,
                          r.lc, &result.algo, r.workspace, ws_bytes, r.stream);
  };
  for (int i = 0; i < 3; ++i) DLLM_CUBLAS_RETURN_IF_ERROR(run());
  DLLM_CUDA_RETURN_IF_ERROR(cudaEventRecord(r.start, r.stream));
  for (int i = 0; i < iterations; ++i) DLLM_CUBLAS_RETURN_IF_ERROR(run());
  DLLM_CUDA_RETURN_IF_ERROR(cudaEventRecord(r.stop, r.stream));
  DLLM_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(r.stop));
  float ms = 0;
  DLLM_CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&ms, r.start, r.stop));
  const double flops = 2.0 * m * n * static_cast<double>(k) * iterations;
  return flops / (ms * 1e-3) / 1e12;
}

absl::StatusOr<double> MeasureDeviceCopyGBps(int64_t bytes, int iterations) {
  if (bytes <= 0 || iterations <= 0) {
    return absl::InvalidArgumentError("MeasureDeviceCopyGBps: bad arguments");
  }
  Resources r;
  DLLM_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&r.stream, cudaStreamNonBlocking));
  DLLM_CUDA_RETURN_IF_ERROR(cudaEventCreate(&r.start));
  DLLM_CUDA_RETURN_IF_ERROR(cudaEventCreate(&r.stop));
  DLLM_CUDA_RETURN_IF_ERROR(cudaMalloc(&r.a, static_cast<size_t>(bytes)));
  DLLM_CUDA_RETURN_IF_ERROR(cudaMalloc(&r.b, static_cast<size_t>(bytes)));
  DLLM_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(r.a, 1, static_cast<size_t>(bytes), r.stream));
  for (int i = 0; i < 2; ++i) {
    DLLM_CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(r.b, r.a, static_cast<size_t>(bytes), cudaMemcpyDeviceToDevice, r.stream));
  }
  DLLM_CUDA_RETURN_IF_ERROR(cudaEventRecord(r.start, r.stream));
  for (int i = 0; i < iterations; ++i) {
    DLLM_CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(r.b, r.a, static_cast<size_t>(bytes), cudaMemcpyDeviceToDevice, r.stream));
  }
  DLLM_CUDA_RETURN_IF_ERROR(cudaEventRecord(r.stop, r.stream));
  DLLM_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(r.stop));
  float ms = 0;
  DLLM_CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&ms, r.start, r.stop));
  return 2.0 * static_cast<double>(bytes) * iterations / (ms * 1e-3) / 1e9;
}

}  // namespace dllm
