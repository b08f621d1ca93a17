// CUDA backend: bf16 weights and activations, fp32 accumulation, cuBLASLt GEMMs and the
// kernels of this folder. Built only when nvcc is found (DLLM_HAVE_CUDA).
//
// Formats: weights are stored as bf16 (f32/f16 checkpoints are rounded to nearest even at
// upload), activation_bytes_per_element() = kv_bytes_per_element() = 2 (bf16). Rounding
// follows docs/models.md section 5 where the backend interface allows it: RMSNorm and SwiGLU use
// kernel_math's *Bf16 helpers, RopeMode::kBf16Rounded rounds cos/sin and each product and sum,
// kFp32 rotates in fp32 and rounds once; GEMMs accumulate in fp32 and round once per output
// (a fused bias or residual is added before that rounding, unlike PyTorch's separate add).
//
// Memory: weights are resident (one cudaMalloc each at upload). Allocate() carves buffers out
// of a device arena (engine/backend/cuda/arena_free_list.h): chunks reserved with cudaMalloc
// up front (CudaBackendOptions::arena_reserve_bytes, or ReserveArena, e.g. the KV budget
// plus step scratch) and grown by arena_chunk_bytes only when a request does not fit, so KV
// slabs and activation buffers never call cudaMalloc once the arena is warm; freed buffers
// coalesce and are reused. All work runs in issue order on one stream, so a freed range can
// be reused immediately: its next user's zero-fill is queued after every earlier reader.
// Small per-call metadata (sequence tables, sampling requests, uploads) goes through a pinned
// staging ring whose slots are recycled at the synchronization points (LogitsStats,
// DownloadFloats, AttentionProbabilities, Synchronize).
//
// Thread-safety: not thread-safe (one worker owns it). Ops select the backend's device
// first, so the owning thread may differ from the creating one.
#ifndef DLLM_ENGINE_BACKEND_CUDA_CUDA_BACKEND_H_
#define DLLM_ENGINE_BACKEND_CUDA_CUDA_BACKEND_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "engine/backend/backend.h"

namespace dllm {

struct CudaBackendOptions {
  int device = 0;
  // Device memory reserved for Allocate() at creation.
  int64_t arena_reserve_bytes = 0;
  // Growth step when a request does not fit the reserved chunks.
  int64_t arena_chunk_bytes = int64_t{256} << 20;
  // Pinned staging ring for per-call metadata and UploadInt32.
  int64_t staging_bytes = int64_t{4} << 20;
  // cuBLASLt (see gemm_lt.h): one algorithm per weight shape, chosen at this row count.
  bool gemm_batch_invariant = true;
  int gemm_reference_rows = 1024;
  int64_t gemm_workspace_bytes = int64_t{32} << 20;
};

// The Backend plus a few CUDA-specific entry points for tests and benchmarks.
class CudaBackend : public Backend {
 public:
  // A weight buffer of `elements` bf16 values offset + scale * (2u - 1), u uniform in (0, 1)
  // from the counter RNG keyed by (seed, index), generated on the device (no host copy).
  virtual absl::StatusOr<std::unique_ptr<DeviceBuffer>> RandomWeights(int64_t elements,
                                                                      uint64_t seed, float scale,
                                                                      float offset) = 0;
  // Makes sure at least `bytes` of arena are reserved (one cudaMalloc for the difference).
  virtual absl::Status ReserveArena(int64_t bytes) = 0;
  virtual int64_t arena_reserved_bytes() const = 0;
  // Times cuBLASLt could not reuse a shape's batch-invariant algorithm (see gemm_lt.h).
  virtual int64_t gemm_invariance_fallbacks() const = 0;
  virtual std::string device_name() const = 0;
};

// Number of usable CUDA devices; 0 when there is no driver or no device.
int CudaDeviceCount();

// Defaults (device 0). FAILED_PRECONDITION when no CUDA device is present.
absl::StatusOr<std::unique_ptr<Backend>> CreateCudaBackend();
absl::StatusOr<std::unique_ptr<CudaBackend>> CreateCudaBackendWithOptions(
    const CudaBackendOptions& options);

}  // namespace dllm

#endif  // DLLM_ENGINE_BACKEND_CUDA_CUDA_BACKEND_H_
