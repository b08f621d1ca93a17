// TensorView accessors (declared in checkpoint.h). Kept apart from the
// checkpoint loader so that the header parser and its fuzzer link without mmap code.
#include <cstring>

#include "engine/core/float16.h"
#include "engine/model/checkpoint.h"

namespace dllm {

int64_t TensorView::NumElements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;  // shapes are overflow-checked when the view is created
  return n;
}

void TensorView::ToFloat(std::vector<float>* out) const {
  const size_t n = bytes.size() / static_cast<size_t>(DTypeSize(dtype));
  out->resize(n);
  float* dst = out->data();
  const uint8_t* src = bytes.data();
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
}

}  // namespace dllm
