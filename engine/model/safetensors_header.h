// Safetensors header parsing: a pure function over the bytes of one file.
//
// File layout (https://github.com/huggingface/safetensors): an 8-byte little-endian header
// length N, N bytes of JSON, then the data section. The JSON maps tensor names to
// {"dtype", "shape", "data_offsets": [begin, end]} (offsets relative to the data section),
// plus an optional "__metadata__" object of string -> string.
//
// ParseSafetensorsHeader checks everything needed to hand out views without undefined
// behaviour: N is at least 2, below kMaxSafetensorsHeaderBytes and inside the file; the JSON
// is an object (nesting depth limited); every entry has a supported dtype (F32, F16, BF16;
// any other is rejected by name), a shape of non-negative integers whose element count and
// byte size do not overflow, and data_offsets with begin <= end <= data section size and
// end - begin == elements * dtype size; and no two non-empty tensors overlap. Offsets need
// not be multiples of the element size (such files exist and Hugging Face reads them), so
// tensor bytes may be unaligned: readers use memcpy or byte loads. Gaps and trailing bytes are
// allowed. Errors are InvalidArgument (or DataLoss for a truncated file) and name the file and,
// where there is one, the tensor.
//
// It reads only the header bytes; tensor bytes are never touched. Thread-safe (no state).
#ifndef DLLM_ENGINE_MODEL_SAFETENSORS_HEADER_H_
#define DLLM_ENGINE_MODEL_SAFETENSORS_HEADER_H_

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/model/checkpoint.h"

namespace dllm {

// Headers of real checkpoints are a few hundred KB; anything this large is corrupt.
inline constexpr uint64_t kMaxSafetensorsHeaderBytes = 100ull << 20;

struct SafetensorsTensorInfo {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  // Absolute byte range in the file: [file_begin, file_end).
  uint64_t file_begin = 0;
  uint64_t file_end = 0;
};

struct SafetensorsHeader {
  uint64_t header_bytes = 0;                   // N, the JSON length
  uint64_t data_offset = 0;                    // 8 + N: where the data section starts in the file
  uint64_t data_bytes = 0;                     // file size - data_offset
  std::vector<SafetensorsTensorInfo> tensors;  // sorted by name, names unique
  std::map<std::string, std::string> metadata;
};

// `file_bytes` is the whole file; `file_name` is used only in error messages.
absl::StatusOr<SafetensorsHeader> ParseSafetensorsHeader(std::span<const uint8_t> file_bytes,
                                                         std::string_view file_name);

// The same checks for a reader that holds only the start of a file of `file_size` bytes:
// `prefix` is the file's first SafetensorsHeaderPrefixBytes(...) bytes (fewer only if the file
// is shorter), so a checkpoint reader never holds tensor bytes to parse a header. A prefix
// too short for the header length it declares is InvalidArgument (a caller error).
absl::StatusOr<SafetensorsHeader> ParseSafetensorsHeader(std::span<const uint8_t> prefix,
                                                         uint64_t file_size,
                                                         std::string_view file_name);

// How many bytes from the start of a file of `file_size` bytes ParseSafetensorsHeader needs,
// given the file's first 8 bytes (`length_bytes`, fewer if the file is shorter): 8 plus the
// declared header length, clamped to the file size and to 8 + kMaxSafetensorsHeaderBytes (the
// parser rejects a larger length without reading it).
uint64_t SafetensorsHeaderPrefixBytes(std::span<const uint8_t> length_bytes, uint64_t file_size);

// Maps a safetensors dtype string ("BF16", "F16", "F32") to DType. InvalidArgument otherwise.
absl::StatusOr<DType> ParseSafetensorsDType(std::string_view name);

}  // namespace dllm

#endif  // DLLM_ENGINE_MODEL_SAFETENSORS_HEADER_H_
