// DType: the element formats of checkpoint tensors and of the weights a backend uploads.
//
// A core value type: the checkpoint reader (model/) produces it and the backend consumes it,
// so it lives below both.
#ifndef DLLM_ENGINE_CORE_DTYPE_H_
#define DLLM_ENGINE_CORE_DTYPE_H_

#include <string_view>

namespace dllm {

enum class DType { kF32, kF16, kBF16 };
std::string_view DTypeName(DType dtype);  // "F32" | "F16" | "BF16", as safetensors spells them
int DTypeSize(DType dtype);               // bytes per element

}  // namespace dllm

#endif  // DLLM_ENGINE_CORE_DTYPE_H_
