// Lazy loader for cuBLASLt. cublaslt_loader.cc defines every cuBLASLt entry point the backend
// calls (same C signatures as <cublasLt.h>); each forwards to the real function in
// libcublasLt.so.13, which is dlopen()ed on the first call instead of being linked.
//
// Why: libcublasLt.so.13 has ~94 KB of static TLS (PT_TLS memsz 0x17020). A linked library's
// static TLS is carved out of every thread's stack, and civetweb (prometheus-cpp's metrics
// Exposer, since replaced) started its threads with a fixed small stack, so pthread_create failed
// with EINVAL and the server could not serve metrics. A dlopen()ed library gets dynamic TLS and
// costs nothing until it is used.
//
// When the library cannot be loaded, every forwarded call returns CUBLAS_STATUS_NOT_INITIALIZED
// and CublasLtLoadError() says why.
#ifndef DLLM_ENGINE_BACKEND_CUDA_CUBLASLT_LOADER_H_
#define DLLM_ENGINE_BACKEND_CUDA_CUBLASLT_LOADER_H_

#include <string>

#include "absl/status/status.h"

namespace dllm {
namespace cuda {

// Loads libcublasLt once (thread-safe; later calls return the cached result). OK when every
// entry point resolved; otherwise FAILED_PRECONDITION carrying CublasLtLoadError().
absl::Status EnsureCublasLtLoaded();

// Loads libcublasLt if not yet tried; empty when it loaded, otherwise a message such as
// "cannot load libcublasLt.so.13: <dlerror>". Thread-safe.
std::string CublasLtLoadError();

}  // namespace cuda
}  // namespace dllm

#endif  // DLLM_ENGINE_BACKEND_CUDA_CUBLASLT_LOADER_H_
