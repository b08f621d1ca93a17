#include "engine/backend/cuda/gemm_lt.h"

#include <cuda_runtime.h>

#include "absl/strings/str_cat.h"
#include "engine/backend/cuda/cuda_check.h"

namespace dllm {
namespace cuda {

struct LtGemm::Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};

  ~Plan() {
    if (a != nullptr) cublasLtMatrixLayoutDestroy(a);
    if (b != nullptr) cublasLtMatrixLayoutDestroy(b);
    if (c != nullptr) cublasLtMatrixLayoutDestroy(c);
    if (desc != nullptr) cublasLtMatmulDescDestroy(desc);
  }
};

LtGemm::LtGemm(cudaStream_t stream, const LtGemmOptions& options)
    : stream_(stream), options_(options) {}

absl::StatusOr<std::unique_ptr<LtGemm>> LtGemm::Create(cudaStream_t stream,
                                                       const LtGemmOptions& options) {
  std::unique_ptr<LtGemm> gemm(new LtGemm(stream, options));
  DLLM_CUBLAS_RETURN_IF_ERROR(cublasLtCreate(&gemm->handle_));
  if (options.workspace_bytes > 0) {
    DLLM_CUDA_RETURN_IF_ERROR(cudaMalloc(&gemm->workspace_, options.workspace_bytes));
  }
  DLLM_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulPreferenceCreate(&gemm->preference_));
  const uint64_t ws = static_cast<uint64_t>(options.workspace_bytes);
  DLLM_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulPreferenceSetAttribute(
      gemm->preference_, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
  return gemm;
}

LtGemm::~LtGemm() {
  plans_.clear();
  if (preference_ != nullptr) cublasLtMatmulPreferenceDestroy(preference_);
  if (workspace_ != nullptr) cudaFree(workspace_);
  if (handle_ != nullptr) cublasLtDestroy(handle_);
}

absl::StatusOr<std::unique_ptr<LtGemm::Plan>> LtGemm::MakePlan(int rows, int in_features,
                                                               int out_features, bool bias,
                                                               bool accumulate) {
  auto plan = std::make_unique<Plan>();
  DLLM_CUBLAS_RETURN_IF_ERROR(
      cublasLtMatmulDescCreate(&plan->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t op_t = CUBLAS_OP_T, op_n = CUBLAS_OP_N;
  DLLM_CUBLAS_RETURN_IF_ERROR(
      cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_t, sizeof op_t));
  DLLM_CUBLAS_RETURN_IF_ERROR(
      cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_n, sizeof op_n));
  if (bias) {
    const cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_BIAS;
    DLLM_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulDescSetAttribute(
        plan->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof epilogue));
    const cudaDataType_t bias_type = CUDA_R_16BF;
    DLLM_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulDescSetAttribute(
        plan->desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type, sizeof bias_type));
  }
  // A = W stored [out, in] row-major = column-major [in, out] (ld in), used transposed.
  DLLM_CUBLAS_RETURN_IF_ERROR(
      cublasLtMatrixLayoutCreate(&plan->a, CUDA_R_16BF, in_features, out_features, in_features));
  // B = X stored [rows, in] row-major = column-major [in, rows] (ld in).
  DLLM_CUBLAS_RETURN_IF_ERROR(
      cublasLtMatrixLayoutCreate(&plan->b, CUDA_R_16BF, in_features, rows, in_features));
  // C = D = Y stored [rows, out] row-major = column-major [out, rows] (ld out).
  DLLM_CUBLAS_RETURN_IF_ERROR(
      cublasLtMatrixLayoutCreate(&plan->c, CUDA_R_16BF, out_features, rows, out_features));
  (void)accumulate;  // beta is passed per call; the layouts are the same
  return plan;
}

// First heuristic result for the plan's shape; false when cuBLASLt offers none.
absl::StatusOr<bool> LtGemm::Heuristic(Plan* plan, cublasLtMatmulAlgo_t* algo) {
  cublasLtMatmulHeuristicResult_t result{};
  int returned = 0;
  DLLM_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulAlgoGetHeuristic(
      handle_, plan->desc, plan->a, plan->b, plan->c, plan->c, preference_, 1, &result, &returned));
  if (returned < 1 || result.state != CUBLAS_STATUS_SUCCESS) return false;
  *algo = result.algo;
  return true;
}

absl::StatusOr<LtGemm::Plan*> LtGemm::GetPlan(int rows, int in_features, int out_features,
                                              bool bias, bool accumulate) {
  const PlanKey key{out_features, in_features, rows, bias, accumulate};
  auto it = plans_.find(key);
  if (it != plans_.end()) return it->second.get();

  absl::StatusOr<std::unique_ptr<Plan>> made =
      MakePlan(rows, in_features, out_features, bias, accumulate);
  if (!made.ok()) return made.status();
  std::unique_ptr<Plan> plan = *std::move(made);

  bool have_algo = false;
  if (options_.batch_invariant) {
    const ShapeKey shape{out_features, in_features, bias, accumulate};
    auto canon = canonical_.find(shape);
    if (canon == canonical_.end()) {
      absl::StatusOr<std::unique_ptr<Plan>> ref =
          MakePlan(options_.reference_rows > 0 ? options_.reference_rows : rows, in_features,
                   out_features, bias, accumulate);
      if (!ref.ok()) return ref.status();
      cublasLtMatmulAlgo_t algo{};
      absl::StatusOr<bool> found = Heuristic(ref->get(), &algo);
      if (!found.ok()) return found.status();
      if (*found) canon = canonical_.emplace(shape, algo).first;
    }
    if (canon != canonical_.end()) {
      cublasLtMatmulHeuristicResult_t check{};
      if (cublasLtMatmulAlgoCheck(handle_, plan->desc, plan->a, plan->b, plan->c, plan->c,
                                  &canon->second, &check) == CUBLAS_STATUS_SUCCESS &&
          check.workspaceSize <= static_cast<size_t>(options_.workspace_bytes)) {
        plan->algo = canon->second;
        have_algo = true;
      } else {
        ++invariance_fallbacks_;
      }
    }
  }
  if (!have_algo) {
    absl::StatusOr<bool> found = Heuristic(plan.get(), &plan->algo);
    if (!found.ok()) return found.status();
    if (!*found) {
      return absl::InternalError(absl::StrCat("cuBLASLt has no bf16 algorithm for rows=", rows,
                                              " in=", in_features, " out=", out_features));
    }
  }
  Plan* raw = plan.get();
  plans_.emplace(key, std::move(plan));
  return raw;
}

absl::Status LtGemm::Run(const void* x, int rows, int in_features, const void* weight,
                         int out_features, const void* bias, bool accumulate, void* y) {
  if (rows <= 0 || out_features <= 0) return absl::OkStatus();
  absl::StatusOr<Plan*> plan =
      GetPlan(rows, in_features, out_features, bias != nullptr, accumulate);
  if (!plan.ok()) return plan.status();
  Plan* p = *plan;
  if (bias != nullptr) {
    DLLM_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulDescSetAttribute(
        p->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
  }
  const float alpha = 1.0f;
  const float beta = accumulate ? 1.0f : 0.0f;
  DLLM_CUBLAS_RETURN_IF_ERROR(
      cublasLtMatmul(handle_, p->desc, &alpha, weight, p->a, x, p->b, &beta, y, p->c, y, p->c,
                     &p->algo, workspace_, static_cast<size_t>(options_.workspace_bytes), stream_));
  return absl::OkStatus();
}

}  // namespace cuda
}  // namespace dllm
