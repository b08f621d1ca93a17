// Error checking for CUDA runtime and cuBLASLt calls: every call's status becomes an
// absl::Status (INTERNAL, naming the call and CUDA's error string) that the caller returns.
#ifndef DLLM_ENGINE_BACKEND_CUDA_CUDA_CHECK_H_
#define DLLM_ENGINE_BACKEND_CUDA_CUDA_CHECK_H_

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/backend/cuda/cublaslt_loader.h"

namespace dllm {
namespace cuda {

inline absl::Status CudaStatus(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return absl::OkStatus();
  if (err == cudaErrorMemoryAllocation) {
    return absl::ResourceExhaustedError(
        absl::StrCat(what, ": ", cudaGetErrorName(err), ": ", cudaGetErrorString(err)));
  }
  return absl::InternalError(
      absl::StrCat(what, ": ", cudaGetErrorName(err), ": ", cudaGetErrorString(err)));
}

inline absl::Status CublasStatus(cublasStatus_t st, const char* what) {
  if (st == CUBLAS_STATUS_SUCCESS) return absl::OkStatus();
  if (st == CUBLAS_STATUS_NOT_INITIALIZED) {
    // The lazy loader (cublaslt_loader.h) reports a missing libcublasLt this way.
    std::string load_error = CublasLtLoadError();
    if (!load_error.empty()) {
      return absl::FailedPreconditionError(absl::StrCat("backend \"cuda\": ", load_error));
    }
  }
  return absl::InternalError(absl::StrCat(what, ": cuBLASLt status ", static_cast<int>(st)));
}

}  // namespace cuda
}  // namespace dllm

// Evaluates a CUDA runtime call (or a launcher returning cudaError_t) and returns an
// absl::Status from the enclosing function when it failed.
#define DLLM_CUDA_RETURN_IF_ERROR(expr)                       \
  do {                                                        \
    const cudaError_t dllm_cuda_err_ = (expr);                \
    if (dllm_cuda_err_ != cudaSuccess) {                      \
      return ::dllm::cuda::CudaStatus(dllm_cuda_err_, #expr); \
    }                                                         \
  } while (0)

#define DLLM_CUBLAS_RETURN_IF_ERROR(expr)                        \
  do {                                                           \
    const cublasStatus_t dllm_cublas_st_ = (expr);               \
    if (dllm_cublas_st_ != CUBLAS_STATUS_SUCCESS) {              \
      return ::dllm::cuda::CublasStatus(dllm_cublas_st_, #expr); \
    }                                                            \
  } while (0)

#endif  // DLLM_ENGINE_BACKEND_CUDA_CUDA_CHECK_H_
