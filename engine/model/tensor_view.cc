// TensorView accessors (declared in checkpoint.h). Kept apart from the checkpoint loader so
// that the header parser and its fuzzer link without the folder and index code.
#include <cstring>

#include "engine/core/float16.h"
#include "engine/model/checkpoint.h"
#include "engine/model/checkpoint_file.h"

namespace dllm {

int64_t TensorView::NumElements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;  // shapes are overflow-checked when the view is created
  return n;
}

int64_t TensorView::SizeBytes() const { return NumElements() * DTypeSize(dtype); }

absl::StatusOr<std::span<const uint8_t>> TensorView::ReadBytes(std::vector<uint8_t>* buffer) const {
  if (file == nullptr) return bytes;
  buffer->resize(static_cast<size_t>(SizeBytes()));
  absl::Status read = file->Read(file_offset, *buffer, "tensor '" + name + "'");
  if (!read.ok()) return read;
  return std::span<const uint8_t>(*buffer);
}

bool TensorView::SameBytesAs(const TensorView& other) const {
  if (dtype != other.dtype || SizeBytes() != other.SizeBytes()) return false;
  if (file != nullptr || other.file != nullptr) {
    return file == other.file && file_offset == other.file_offset;
  }
  return bytes.data() == other.bytes.data() && bytes.size() == other.bytes.size();
}

absl::Status TensorView::ToFloat(std::vector<float>* out) const {
  std::vector<uint8_t> buffer;
  auto read = ReadBytes(&buffer);
  if (!read.ok()) return read.status();
  const std::span<const uint8_t> data = *read;
  const size_t n = data.size() / static_cast<size_t>(DTypeSize(dtype));
  out->resize(n);
  float* dst = out->data();
  const uint8_t* src = data.data();
  // memcpy per element: the view carries no alignment promise to the compiler.
  switch (dtype) {
    case DType::kF32:
      if (n > 0) std::memcpy(dst, src, n * sizeof(float));
      break;
    case DType::kBF16:
      for (size_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, src + 2 * i, 2);
        dst[i] = Bf16ToFloat(h);
      }
      break;
    case DType::kF16:
      for (size_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, src + 2 * i, 2);
        dst[i] = F16ToFloat(h);
      }
      break;
  }
  return absl::OkStatus();
}

}  // namespace dllm
