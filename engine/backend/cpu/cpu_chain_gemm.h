// CpuChainGemm: out[rows, n] = a[rows, k] · b[k, n] where every output element is ONE
// sequential fused multiply-add chain: acc = +0; acc = fma(a[r][i], b[i][c], acc) for
// i = 0, 1, ..., k-1 (fp32, round to nearest even).
//
// Vectors run across output columns (b's rows are contiguous there), so no lane folding is
// needed and the order is the same on every SIMD target, for any row count, row position or
// column tiling: results equal a scalar std::fma loop bit for bit. This suits reductions
// that are short (attention's q·k over head_dim) or whose b is naturally [k, n] (P·V with V
// in its cached [position, dim] layout); CpuGemm (cpu_gemm.h) serves the model's weights.
//
// Strides are in elements. a, b, out must not overlap. Single-threaded: callers parallelize
// over independent calls (attention: one query head per task).
#ifndef DLLM_ENGINE_BACKEND_CPU_CPU_CHAIN_GEMM_H_
#define DLLM_ENGINE_BACKEND_CPU_CPU_CHAIN_GEMM_H_

#include <cstdint>

namespace dllm {

void CpuChainGemm(const float* a, int64_t lda, int64_t rows, const float* b, int64_t ldb, int64_t k,
                  int64_t n, float* out, int64_t ld_out);

}  // namespace dllm

#endif  // DLLM_ENGINE_BACKEND_CPU_CPU_CHAIN_GEMM_H_
