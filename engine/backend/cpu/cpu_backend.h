// CPU backend: fp32 weights and activations, OpenBLAS sgemm, a small worker pool for the
// per-row and per-head work.
//
// Numerics: everything is fp32 (weights are widened once at upload). RopeMode::kBf16Rounded
// is computed as kFp32: the CPU backend does not emulate bf16 rounding anywhere, so Dream
// matches an fp32 reference. Batch invariance: see cpu_backend.cc (GEMMs run over fixed-size
// row chunks, every per-row/per-head reduction runs sequentially on one thread).
#ifndef DLLM_ENGINE_BACKEND_CPU_CPU_BACKEND_H_
#define DLLM_ENGINE_BACKEND_CPU_CPU_BACKEND_H_

#include <memory>

#include "absl/status/statusor.h"
#include "engine/backend/backend.h"

namespace dllm {

// threads > 0: worker count for OpenBLAS and the backend's pool; 0: OpenBLAS's default and
// std::thread::hardware_concurrency() workers.
absl::StatusOr<std::unique_ptr<Backend>> CreateCpuBackend(int threads);

}  // namespace dllm

#endif  // DLLM_ENGINE_BACKEND_CPU_CPU_BACKEND_H_
