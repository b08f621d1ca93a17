// CpuGemm: the CPU backend's own GEMM, y[rows, n] = x[rows, k] · w[n, k]ᵀ (+ bias) (+ y).
//
// Numerics contract (batch invariance by construction). Every output element is one dot
// product computed in an order fixed by k alone:
//   - k is zero-padded to a multiple of 16;
//   - 16 lane accumulators start at +0; lane l sums x[i]·w[i] for i ≡ l (mod 16) in
//     increasing i, each step one fused multiply-add (fp32, round to nearest even);
//   - then the lanes fold in halves: a[l] = a[l] + a[l + 8] for l < 8, then + 4, + 2, + 1;
//   - then v = dot (+ bias[o]) and, with accumulate, y = y_old + v (PyTorch's order for
//     residual + linear(x)).
// The row count, a row's place in the call, the thread count, the tiling and the SIMD target
// (AVX-512: one 16-lane vector; AVX2: two 8-lane vectors; no FMA: std::fma per lane) never
// change it, so every target gives bitwise-equal results, equal to a scalar std::fma
// reference (tests/engine/backend/cpu_gemm_test.cc checks each target the CPU supports).
// No third-party BLAS is involved: nothing depends on which kernels a library picks.
//
// Weights are used in their stored format (fp32 or bf16, [n, k] row-major, PyTorch
// nn.Linear layout); bf16 is widened to fp32 exactly in registers, so bf16 weights take half
// the memory and give the same bits as their fp32 widening.
//
// Threads split the output columns (fixed chunks of whole columns), never the reduction.
#ifndef DLLM_ENGINE_BACKEND_CPU_CPU_GEMM_H_
#define DLLM_ENGINE_BACKEND_CPU_CPU_GEMM_H_

#include <cstdint>
#include <string>
#include <vector>

#include "engine/backend/cpu/thread_pool.h"

namespace dllm {

enum class GemmWeightType { kF32, kBF16 };

// A weight matrix [n, k] in its stored format. Not owned.
struct GemmWeight {
  const void* data = nullptr;  // float* for kF32, uint16_t* (bf16 bits) for kBF16
  GemmWeightType type = GemmWeightType::kF32;
  int64_t n = 0;  // output features (rows of w)
  int64_t k = 0;  // input features
};

// y = x · wᵀ (+ bias when non-null) (+ y's old contents when accumulate), x [rows, w.k] and
// y [rows, w.n] dense row-major; y must not alias x. `pool` may be null (calling thread only).
// `scratch` (not null) receives x repacked into register-tile order (about rows x k floats),
// grown on demand; pass the same vector across calls to reuse it.
void CpuGemm(const float* x, int64_t rows, const GemmWeight& w, const float* bias, bool accumulate,
             float* y, ThreadPool* pool, std::vector<float>* scratch);

// The Highway target CpuGemm dispatches to now, e.g. "AVX3", "AVX2", "EMU128" (for logs,
// benchmarks and tests that force a target with hwy::SetSupportedTargetsForTest).
std::string CpuGemmTargetName();

// Highway target bits this build compiled a kernel for and this CPU can run, best first.
std::vector<int64_t> CpuGemmSupportedTargets();

}  // namespace dllm

#endif  // DLLM_ENGINE_BACKEND_CPU_CPU_GEMM_H_
