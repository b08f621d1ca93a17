// Batch-invariant fp32 GEMM for the CPU backend: y[rows, n] = x[rows, k] · w[n, k]ᵀ.
//
// OpenBLAS picks its algorithm from the problem size: below a size threshold it switches to
// "small matrix" kernels whose per-element summation order differs from the blocked kernel
// (measured on 0.3.21 SkylakeX: rows 1-2 of a 512x256 weight differ in the last bits from
// the same rows computed in a larger call). Above it, a row's result does not depend on the
// row count or on the row's place in the call (measured for every row count 1..300). So:
//   - weights with n*k <= kSmallWeightElements never go to OpenBLAS; a plain loop with a
//     fixed per-element order computes them (tiny models, where speed does not matter);
//   - larger weights go to sgemm with the row count padded up to at least
//     ceil(kMinGemmMacs / (n*k)) zero rows, which keeps every call above the small-matrix
//     bound (OpenBLAS takes the small kernel when rows*n*k <= 100^3; 2^20 is the next power
//     of two). Padding is a floor on a step's cost, paid most by partial steps: at 2^22 it
//     cut the EntropyCache speedup on the 1M-parameter test models from 1.9x to 1.5x.
// The choice depends only on the weight's shape, never on the row count. Batch invariance is
// re-checked empirically by tests/engine/backend/cpu_gemm_test.cc.
#ifndef DLLM_ENGINE_BACKEND_CPU_CPU_GEMM_H_
#define DLLM_ENGINE_BACKEND_CPU_CPU_GEMM_H_

#include <cstdint>
#include <vector>

namespace dllm {

inline constexpr int64_t kSmallWeightElements = int64_t{1} << 14;
inline constexpr int64_t kMinGemmMacs = int64_t{1} << 20;

// Rows the sgemm call is padded up to for a weight of n*k elements (1 when no padding).
int64_t CpuGemmMinRows(int64_t n, int64_t k);

// y = x · wᵀ, plus y's old contents when accumulate. `scratch` holds padding rows between
// calls (grown on demand).
void CpuGemm(const float* x, int64_t rows, int64_t k, const float* w, int64_t n, bool accumulate,
             float* y, std::vector<float>* scratch);

}  // namespace dllm

#endif  // DLLM_ENGINE_BACKEND_CPU_CPU_GEMM_H_
