// Chat templates of the two model families, rendered exactly as the published
// tokenizer_config.json templates do (see shared reference models.md §2.4 and §3.4).
#ifndef DLLM_ENGINE_TOKENIZER_CHAT_TEMPLATE_H_
#define DLLM_ENGINE_TOKENIZER_CHAT_TEMPLATE_H_

#include <span>
#include <string>

#include "absl/status/statusor.h"
#include "engine/core/model_family.h"

namespace dllm {

struct ChatMessage {
  std::string role;  // system | user | assistant
  std::string content;
};

// LLaDA: <|startoftext|> once, Llama-3 headers, trimmed content, the assistant header always
// appended. Dream: ChatML with the default system prompt when none is given, then the
// generation prompt. Errors: INVALID_ARGUMENT for an empty list or an unknown role.
absl::StatusOr<std::string> RenderChat(ModelFamily family, std::span<const ChatMessage> messages);

}  // namespace dllm

#endif  // DLLM_ENGINE_TOKENIZER_CHAT_TEMPLATE_H_
