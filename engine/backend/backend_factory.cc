#include "engine/backend/backend_factory.h"

#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/backend/cpu/cpu_backend.h"

namespace dllm {

#ifdef DLLM_HAVE_CUDA
// Defined by the CUDA backend (engine/backend/cuda/cuda_backend.h).
absl::StatusOr<std::unique_ptr<Backend>> CreateCudaBackend();
#endif

absl::StatusOr<std::unique_ptr<Backend>> CreateBackend(std::string_view kind, int cpu_threads) {
  if (kind == "cpu") {
    if (cpu_threads < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("cpu_threads must be >= 0, got ", cpu_threads));
    }
    return CreateCpuBackend(cpu_threads);
  }
  if (kind == "cuda") {
#ifdef DLLM_HAVE_CUDA
    return CreateCudaBackend();
#else
    return absl::UnimplementedError(
        "backend \"cuda\" is not available: this build has no CUDA support");
#endif
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown backend \"", std::string(kind), "\" (expected \"cpu\" or \"cuda\")"));
}

}  // namespace dllm
