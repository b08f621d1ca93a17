// CPU backend: fp32 activations and KV, weights in their checkpoint format (bf16 stays bf16,
// f16 is widened to fp32 at load), the project's own SIMD GEMM (cpu_gemm.h) and a small
// worker pool for the per-row and per-head work. No BLAS library is linked.
//
// Numerics: activations are fp32 and bf16 weights widen exactly, so results equal those of
// the fp32 widening of the checkpoint. RopeMode::kBf16Rounded is computed as kFp32: the CPU
// backend does not emulate bf16 rounding anywhere, so Dream matches an fp32 reference.
// Batch invariance holds by construction: the GEMM pins every output element's summation
// order by the weight shape alone (same bits on every SIMD target), and every per-row and
// per-head reduction (norms, attention, logits statistics) runs sequentially on one thread
// in a fixed order.
#ifndef DLLM_ENGINE_BACKEND_CPU_CPU_BACKEND_H_
#define DLLM_ENGINE_BACKEND_CPU_CPU_BACKEND_H_

#include <memory>

#include "absl/status/statusor.h"
#include "engine/backend/backend.h"

namespace dllm {

// threads > 0: the backend pool's thread count (the calling thread included); 0:
// std::thread::hardware_concurrency().
absl::StatusOr<std::unique_ptr<Backend>> CreateCpuBackend(int threads);

}  // namespace dllm

#endif  // DLLM_ENGINE_BACKEND_CPU_CPU_BACKEND_H_
