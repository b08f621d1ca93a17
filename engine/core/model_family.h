// ModelFamily: which of the two supported model families a checkpoint belongs to.
//
// A core value type: the model config (model/) parses it and the chat templates (tokenizer/)
// branch on it, so it lives below both.
#ifndef DLLM_ENGINE_CORE_MODEL_FAMILY_H_
#define DLLM_ENGINE_CORE_MODEL_FAMILY_H_

#include <string_view>

namespace dllm {

enum class ModelFamily { kLlada, kDream };

std::string_view ModelFamilyName(ModelFamily family);  // "LLaDA" | "Dream"

}  // namespace dllm

#endif  // DLLM_ENGINE_CORE_MODEL_FAMILY_H_
