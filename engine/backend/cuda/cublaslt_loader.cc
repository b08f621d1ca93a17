// Defines the cuBLASLt entry points used by the backend as forwarders into a dlopen()ed
// libcublasLt (see cublaslt_loader.h for why the library is not linked: its 94 KB of static TLS
// pushed every thread's minimum stack above the fixed stack civetweb gives its threads, so the
// metrics Exposer failed to start). Only these forwarders may call into cuBLASLt; a new entry
// point needs a line in DLLM_CUBLASLT_FUNCTIONS and a forwarder below, or the link fails.
#include "engine/backend/cuda/cublaslt_loader.h"

#include <cublasLt.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <mutex>
#include <string>

#include "absl/strings/str_cat.h"

// X-macro: every cuBLASLt function the backend uses.
#define DLLM_CUBLASLT_FUNCTIONS(X)        \
  X(cublasLtCreate)                       \
  X(cublasLtDestroy)                      \
  X(cublasLtMatmul)                       \
  X(cublasLtMatmulAlgoCheck)              \
  X(cublasLtMatmulAlgoGetHeuristic)       \
  X(cublasLtMatmulDescCreate)             \
  X(cublasLtMatmulDescDestroy)            \
  X(cublasLtMatmulDescSetAttribute)       \
  X(cublasLtMatmulPreferenceCreate)       \
  X(cublasLtMatmulPreferenceDestroy)      \
  X(cublasLtMatmulPreferenceSetAttribute) \
  X(cublasLtMatrixLayoutCreate)           \
  X(cublasLtMatrixLayoutDestroy)

namespace dllm {
namespace cuda {
namespace {

constexpr char kLibrary[] = "libcublasLt.so.13";

// Resolved entry points; all set or all null. Types come from the header's declarations, so a
// signature mismatch is a compile error.
struct CublasLtApi {
#define DLLM_CUBLASLT_MEMBER(name) decltype(&::name) name = nullptr;
  DLLM_CUBLASLT_FUNCTIONS(DLLM_CUBLASLT_MEMBER)
#undef DLLM_CUBLASLT_MEMBER
  std::string error;  // empty iff loaded
};

std::string DlError() {
  const char* e = dlerror();
  return e != nullptr ? std::string(e) : std::string("unknown dlopen error");
}

// The directory holding the libcudart this process uses (cuBLASLt ships next to it), or "" when
// unknown. Lets dlopen find the library even when it is neither in the loader's cache nor on the
// executable's RUNPATH.
std::string CudartDirectory() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<const void*>(&cudaRuntimeGetVersion), &info) == 0 ||
      info.dli_fname == nullptr) {
    return "";
  }
  const std::string path = info.dli_fname;
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "" : path.substr(0, slash + 1);
}

void* OpenLibrary(std::string* error) {
  // RTLD_LOCAL: our forwarders are the only users; its symbols must not interpose on anything.
  if (void* h = dlopen(kLibrary, RTLD_NOW | RTLD_LOCAL)) return h;
  const std::string first_error = DlError();
  if (void* h = dlopen("libcublasLt.so", RTLD_NOW | RTLD_LOCAL)) return h;
  const std::string dir = CudartDirectory();
  if (!dir.empty()) {
    if (void* h = dlopen((dir + kLibrary).c_str(), RTLD_NOW | RTLD_LOCAL)) return h;
  }
  *error = absl::StrCat("cannot load ", kLibrary, ": ", first_error);
  return nullptr;
}

CublasLtApi LoadApi() {
  CublasLtApi api;
  // Never dlclose()d: handles may be destroyed during static destruction, and the process keeps
  // using the library until exit anyway.
  void* lib = OpenLibrary(&api.error);
  if (lib == nullptr) return api;
  CublasLtApi resolved;
#define DLLM_CUBLASLT_RESOLVE(name)                                                        \
  resolved.name = reinterpret_cast<decltype(&::name)>(dlsym(lib, #name));                  \
  if (resolved.name == nullptr) {                                                          \
    api.error = absl::StrCat("cannot resolve ", #name, " in ", kLibrary, ": ", DlError()); \
    return api;                                                                            \
  }
  DLLM_CUBLASLT_FUNCTIONS(DLLM_CUBLASLT_RESOLVE)
#undef DLLM_CUBLASLT_RESOLVE
  return resolved;
}

// Process-wide by nature (one shared library per process); written once under call_once and
// read-only afterwards.
const CublasLtApi& Api() {
  static std::once_flag once;
  static CublasLtApi* api = nullptr;
  std::call_once(once, [] { api = new CublasLtApi(LoadApi()); });
  return *api;
}

}  // namespace

absl::Status EnsureCublasLtLoaded() {
  const CublasLtApi& api = Api();
  if (api.error.empty()) return absl::OkStatus();
  return absl::FailedPreconditionError(api.error);
}

std::string CublasLtLoadError() { return Api().error; }

}  // namespace cuda
}  // namespace dllm

// The forwarders. Same names and signatures as <cublasLt.h> (extern "C" there), so every call
// site resolves here at link time.
#define DLLM_CUBLASLT_FORWARD(name, ...)                         \
  const dllm::cuda::CublasLtApi& api = dllm::cuda::Api();        \
  if (api.name == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED; \
  return api.name(__VA_ARGS__)

cublasStatus_t cublasLtCreate(cublasLtHandle_t* lightHandle) {
  DLLM_CUBLASLT_FORWARD(cublasLtCreate, lightHandle);
}

cublasStatus_t cublasLtDestroy(cublasLtHandle_t lightHandle) {
  DLLM_CUBLASLT_FORWARD(cublasLtDestroy, lightHandle);
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t computeDesc,
                              const void* alpha, const void* A, cublasLtMatrixLayout_t Adesc,
                              const void* B, cublasLtMatrixLayout_t Bdesc, const void* beta,
                              const void* C, cublasLtMatrixLayout_t Cdesc, void* D,
                              cublasLtMatrixLayout_t Ddesc, const cublasLtMatmulAlgo_t* algo,
                              void* workspace, size_t workspaceSizeInBytes, cudaStream_t stream) {
  DLLM_CUBLASLT_FORWARD(cublasLtMatmul, lightHandle, computeDesc, alpha, A, Adesc, B, Bdesc, beta,
                        C, Cdesc, D, Ddesc, algo, workspace, workspaceSizeInBytes, stream);
}

cublasStatus_t cublasLtMatmulAlgoCheck(cublasLtHandle_t lightHandle,
                                       cublasLtMatmulDesc_t operationDesc,
                                       cublasLtMatrixLayout_t Adesc, cublasLtMatrixLayout_t Bdesc,
                                       cublasLtMatrixLayout_t Cdesc, cublasLtMatrixLayout_t Ddesc,
                                       const cublasLtMatmulAlgo_t* algo,
                                       cublasLtMatmulHeuristicResult_t* result) {
  DLLM_CUBLASLT_FORWARD(cublasLtMatmulAlgoCheck, lightHandle, operationDesc, Adesc, Bdesc, Cdesc,
                        Ddesc, algo, result);
}

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(
    cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t operationDesc, cublasLtMatrixLayout_t Adesc,
    cublasLtMatrixLayout_t Bdesc, cublasLtMatrixLayout_t Cdesc, cublasLtMatrixLayout_t Ddesc,
    cublasLtMatmulPreference_t preference, int requestedAlgoCount,
    cublasLtMatmulHeuristicResult_t heuristicResultsArray[], int* returnAlgoCount) {
  DLLM_CUBLASLT_FORWARD(cublasLtMatmulAlgoGetHeuristic, lightHandle, operationDesc, Adesc, Bdesc,
                        Cdesc, Ddesc, preference, requestedAlgoCount, heuristicResultsArray,
                        returnAlgoCount);
}

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* matmulDesc,
                                        cublasComputeType_t computeType, cudaDataType_t scaleType) {
  DLLM_CUBLASLT_FORWARD(cublasLtMatmulDescCreate, matmulDesc, computeType, scaleType);
}

cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t matmulDesc) {
  DLLM_CUBLASLT_FORWARD(cublasLtMatmulDescDestroy, matmulDesc);
}

cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t matmulDesc,
                                              cublasLtMatmulDescAttributes_t attr, const void* buf,
                                              size_t sizeInBytes) {
  DLLM_CUBLASLT_FORWARD(cublasLtMatmulDescSetAttribute, matmulDesc, attr, buf, sizeInBytes);
}

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* pref) {
  DLLM_CUBLASLT_FORWARD(cublasLtMatmulPreferenceCreate, pref);
}

cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref) {
  DLLM_CUBLASLT_FORWARD(cublasLtMatmulPreferenceDestroy, pref);
}

cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t pref,
                                                    cublasLtMatmulPreferenceAttributes_t attr,
                                                    const void* buf, size_t sizeInBytes) {
  DLLM_CUBLASLT_FORWARD(cublasLtMatmulPreferenceSetAttribute, pref, attr, buf, sizeInBytes);
}

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* matLayout, cudaDataType type,
                                          uint64_t rows, uint64_t cols, int64_t ld) {
  DLLM_CUBLASLT_FORWARD(cublasLtMatrixLayoutCreate, matLayout, type, rows, cols, ld);
}

cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t matLayout) {
  DLLM_CUBLASLT_FORWARD(cublasLtMatrixLayoutDestroy, matLayout);
}

#undef DLLM_CUBLASLT_FORWARD
