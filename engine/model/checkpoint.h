// Checkpoint: the tensors of a Hugging Face model folder, bounds-checked and read on demand.
//
// Opens either <dir>/model.safetensors or the shards listed by
// <dir>/model.safetensors.index.json (each tensor resolved through `weight_map`). Every
// header, offset, shape and dtype is validated at Open(): a truncated, oversized or
// inconsistent file is an error naming the file and the tensor, never undefined behaviour.
// Open() reads only the headers; a tensor's bytes are read (pread, CheckpointFile) when a
// caller asks for them through TensorView::ReadBytes, into a buffer the caller owns, so that
// loading holds one tensor in flight, not a copy of the whole checkpoint. A file that shrinks
// after Open() (rewritten while the server loads it) is a DataLoss error naming the file and the
// tensor; nothing is memory-mapped, so it cannot raise SIGBUS.
//
// Thread-safety: immutable after Open(); safe to share. TensorViews refer to the Checkpoint's
// open files and stay valid while the Checkpoint lives.
#ifndef DLLM_ENGINE_MODEL_CHECKPOINT_H_
#define DLLM_ENGINE_MODEL_CHECKPOINT_H_

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/core/dtype.h"

namespace dllm {

class CheckpointFile;  // engine/model/checkpoint_file.h

// One tensor: its metadata and where its bytes are. The bytes (exactly SizeBytes() of them,
// little-endian like the file) are either in memory, in `bytes` (views that tests, random
// models and the fuzzer build over buffers they own), or, for views a Checkpoint returns, in
// `file` at [file_offset, file_offset + SizeBytes()) and read by ReadBytes. Bytes are NOT
// necessarily aligned to DTypeSize(dtype) (safetensors allows any offset): read elements with
// memcpy or byte loads, never through a typed pointer.
struct TensorView {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;            // row-major; PyTorch Linear weights are [out, in]
  std::span<const uint8_t> bytes;        // in-memory views; empty when `file` is set
  const CheckpointFile* file = nullptr;  // checkpoint views; owned by the Checkpoint
  uint64_t file_offset = 0;              // absolute offset of the first byte in `file`

  int64_t NumElements() const;
  int64_t SizeBytes() const;  // NumElements() * DTypeSize(dtype)
  // The tensor's bytes: `bytes` itself for an in-memory view, else the file range read into
  // `*buffer` (resized to SizeBytes(); reuse one buffer across tensors to bound memory). The
  // span is valid until `*buffer` or the view's storage changes. DataLoss naming the file and
  // the tensor when the file no longer holds the range (CheckpointFile::Read).
  absl::StatusOr<std::span<const uint8_t>> ReadBytes(std::vector<uint8_t>* buffer) const;
  // True when both views denote the same bytes (one tensor used twice: tied embeddings).
  bool SameBytesAs(const TensorView& other) const;
  // Converts to fp32 into `out` (resized). bf16/f16 are widened exactly. Errors as ReadBytes.
  absl::Status ToFloat(std::vector<float>* out) const;
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
