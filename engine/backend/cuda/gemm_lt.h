// LtGemm: the CUDA backend's bf16 GEMMs through cuBLASLt (fp32 accumulation).
//
// y[rows, out] = x[rows, in] · Wᵀ (+ bias) (+ y): in cuBLASLt's column-major terms
// D[out, rows] = op_T(W)[out, in] · X[in, rows] (+ bias per D row) + beta · C, with C = D = y
// and beta = 1 to accumulate. One handle and one workspace per stream (the backend has one).
//
// Algorithm choice and batch invariance: cuBLASLt heuristics pick kernels by problem size,
// and different kernels sum a row's dot products in different orders. In batch-invariant
// mode (the default) the algorithm is chosen once per weight shape and epilogue by
// cublasLtMatmulAlgoGetHeuristic at `reference_rows` rows and reused for every row count
// (validated per row count with cublasLtMatmulAlgoCheck); a row's result then does not
// depend on the other rows in the call. Only if that algorithm is not applicable to some row
// count does that shape fall back to its own heuristic choice (counted in
// invariance_fallbacks()). Without batch invariance each (shape, rows) gets its own heuristic
// choice. Either way choices are cached per shape, so the step path makes no heuristic calls
// once warm.
//
// Thread-safety: none (the backend serializes calls).
#ifndef DLLM_ENGINE_BACKEND_CUDA_GEMM_LT_H_
#define DLLM_ENGINE_BACKEND_CUDA_GEMM_LT_H_

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <tuple>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace dllm {
namespace cuda {

struct LtGemmOptions {
  int64_t workspace_bytes = int64_t{32} << 20;
  bool batch_invariant = true;
  int reference_rows = 1024;
};

class LtGemm {
 public:
  static absl::StatusOr<std::unique_ptr<LtGemm>> Create(cudaStream_t stream,
                                                        const LtGemmOptions& options);
  ~LtGemm();
  LtGemm(const LtGemm&) = delete;
  LtGemm& operator=(const LtGemm&) = delete;

  // All pointers are device bf16; bias may be null.
  absl::Status Run(const void* x, int rows, int in_features, const void* weight, int out_features,
                   const void* bias, bool accumulate, void* y);

  int64_t invariance_fallbacks() const { return invariance_fallbacks_; }

 private:
  struct Plan;
  using ShapeKey = std::tuple<int, int, bool, bool>;      // out, in, bias, accumulate
  using PlanKey = std::tuple<int, int, int, bool, bool>;  // out, in, rows, bias, accumulate

  LtGemm(cudaStream_t stream, const LtGemmOptions& options);
  absl::StatusOr<Plan*> GetPlan(int rows, int in_features, int out_features, bool bias,
                                bool accumulate);
  absl::StatusOr<std::unique_ptr<Plan>> MakePlan(int rows, int in_features, int out_features,
                                                 bool bias, bool accumulate);
  absl::StatusOr<bool> Heuristic(Plan* plan, cublasLtMatmulAlgo_t* algo);

  cudaStream_t stream_;
  LtGemmOptions options_;
  cublasLtHandle_t handle_ = nullptr;
  void* workspace_ = nullptr;
  cublasLtMatmulPreference_t preference_ = nullptr;
  absl::flat_hash_map<PlanKey, std::unique_ptr<Plan>> plans_;
  absl::flat_hash_map<ShapeKey, cublasLtMatmulAlgo_t> canonical_;
  int64_t invariance_fallbacks_ = 0;
};

}  // namespace cuda
}  // namespace dllm

#endif  // DLLM_ENGINE_BACKEND_CUDA_GEMM_LT_H_
