// Checkpoint: the tensors of a Hugging Face model folder, memory-mapped and bounds-checked.
//
// Opens either <dir>/model.safetensors or the shards listed by
// <dir>/model.safetensors.index.json (each tensor resolved through `weight_map`). Every
// header, offset, shape and dtype is validated at Open(): a truncated, oversized or
// inconsistent file is an error naming the file and the tensor, never undefined behaviour.
// Tensor bytes are not read at Open(); they are paged in lazily through the mapping.
//
// Thread-safety: immutable after Open(); safe to share. TensorViews point into the mapping and
// stay valid while the Checkpoint lives.
#ifndef DLLM_ENGINE_MODEL_CHECKPOINT_H_
#define DLLM_ENGINE_MODEL_CHECKPOINT_H_

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/core/dtype.h"

namespace dllm {

struct TensorView {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;      // row-major; PyTorch Linear weights are [out, in]
  std::span<const uint8_t> bytes;  // exactly prod(shape) * DTypeSize(dtype) bytes
  // Little-endian like the file, and NOT necessarily aligned to DTypeSize(dtype) (safetensors
  // allows any offset): read elements with memcpy or byte loads, never through a typed
  // pointer.
  int64_t NumElements() const;
  // Converts to fp32 into `out` (resized). bf16/f16 are widened exactly.
  void ToFloat(std::vector<float>* out) const;
};

class Checkpoint {
 public:
  static absl::StatusOr<std::unique_ptr<Checkpoint>> Open(const std::string& model_dir);
  // Opens one safetensors file directly (tests, fuzzing).
  static absl::StatusOr<std::unique_ptr<Checkpoint>> OpenFile(const std::string& path);
  virtual ~Checkpoint() = default;

  // NOT_FOUND naming the tensor when absent.
  virtual absl::StatusOr<TensorView> Get(std::string_view name) const = 0;
  virtual std::vector<std::string> TensorNames() const = 0;
};

}  // namespace dllm

#endif  // DLLM_ENGINE_MODEL_CHECKPOINT_H_
