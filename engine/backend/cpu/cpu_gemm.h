// CpuGemm: the CPU backend's own GEMM, y[rows, n] = x[rows, k] · w[n, k]ᵀ (+ bias) (+ y).
//
// Numerics contract (batch invariance by construction). Every output element is ONE
// sequential fused multiply-add chain over k:
//   acc = +0; acc = fma(x[r][i], w[o][i], acc) for i = 0, 1, ..., k-1 (fp32, round to
//   nearest even); then v = acc (+ bias[o]) and, with accumulate, y = y_old + v (PyTorch's
//   order for residual + linear(x)).
// Vectors run across output columns, so no lane ever folds into another: the row count, a
// row's place in the call, the thread count, the cache blocking (a partial chain is parked in
// fp32 memory and resumed, which changes no bit) and the SIMD target (AVX-512, AVX2, or
// std::fma without FMA instructions) never change a result. Every target equals a scalar
// std::fma loop bit for bit (tests/engine/backend/cpu_gemm_test.cc checks each target the
// CPU supports). No third-party BLAS is involved.
//
// Weights are packed once, at load (PackGemmWeight), into column panels of kGemmPanel
// outputs: panel p holds, for i = 0 .. k-1, the kGemmPanel values w[p*16 + j][i] side by
// side (zero past n). A kernel step then reads one contiguous vector per panel and
// broadcasts one x value per row. The stored format is kept: bf16 stays bf16 (widened to fp32
// exactly in registers), fp32 stays fp32.
//
// Threads split the output panels (fixed groups), never the reduction.
#ifndef DLLM_ENGINE_BACKEND_CPU_CPU_GEMM_H_
#define DLLM_ENGINE_BACKEND_CPU_CPU_GEMM_H_

#include <cstdint>
#include <string>
#include <vector>

#include "engine/backend/cpu/thread_pool.h"

namespace dllm {

enum class GemmWeightType { kF32, kBF16 };

// Output columns per packed panel.
inline constexpr int64_t kGemmPanel = 16;

// A packed weight matrix (PackGemmWeight) of logical shape [n, k]. Not owned.
struct GemmWeight {
  const void* data = nullptr;  // float* for kF32, uint16_t* (bf16 bits) for kBF16
  GemmWeightType type = GemmWeightType::kF32;
  int64_t n = 0;  // output features (rows of the logical w)
  int64_t k = 0;  // input features
};

// Bytes of the packed form of an [n, k] weight: n rounded up to whole panels, times k.
int64_t PackedGemmWeightBytes(GemmWeightType type, int64_t n, int64_t k);

// Packs row-major w[n, k] (PyTorch nn.Linear layout; any alignment) into `packed`
// (PackedGemmWeightBytes(type, n, k) bytes, ideally 64-byte aligned). Same element format.
void PackGemmWeight(const void* row_major, GemmWeightType type, int64_t n, int64_t k, void* packed);

// Logical element w[o][i] of a packed weight, as fp32 (for gathers and tests; not fast).
float PackedGemmWeightAt(const GemmWeight& w, int64_t o, int64_t i);

// y = x · wᵀ (+ bias when non-null) (+ y's old contents when accumulate), x [rows, w.k] and
// y [rows, w.n] dense row-major; y must not alias x. `pool` may be null (calling thread only).
// `scratch` (not null) holds parked partial chains when k spans several cache blocks and
// accumulate is set (about rows x n floats), grown on demand; pass the same vector across
// calls to reuse it.
void CpuGemm(const float* x, int64_t rows, const GemmWeight& w, const float* bias, bool accumulate,
             float* y, ThreadPool* pool, std::vector<float>* scratch);

// The Highway target CpuGemm dispatches to now, e.g. "AVX3", "AVX2", "EMU128" (for logs,
// benchmarks and tests that force a target with hwy::SetSupportedTargetsForTest).
std::string CpuGemmTargetName();

// Highway target bits this build compiled a kernel for and this CPU can run, best first.
std::vector<int64_t> CpuGemmSupportedTargets();

}  // namespace dllm

#endif  // DLLM_ENGINE_BACKEND_CPU_CPU_GEMM_H_
