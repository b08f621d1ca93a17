// CreateBackend: builds a Backend by name ("cpu" or "cuda").
#ifndef DLLM_ENGINE_BACKEND_BACKEND_FACTORY_H_
#define DLLM_ENGINE_BACKEND_BACKEND_FACTORY_H_

#include <memory>
#include <string_view>

#include "absl/status/statusor.h"
#include "engine/backend/backend.h"

namespace dllm {

// "cpu": the CPU backend (own SIMD kernels); cpu_threads > 0 sets its thread count, 0 uses
// one per hardware thread. "cuda": UNIMPLEMENTED unless built with DLLM_HAVE_CUDA.
// Other names: INVALID_ARGUMENT.
absl::StatusOr<std::unique_ptr<Backend>> CreateBackend(std::string_view kind, int cpu_threads);

}  // namespace dllm

#endif  // DLLM_ENGINE_BACKEND_BACKEND_FACTORY_H_
