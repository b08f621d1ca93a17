// Chat templates of the two model families, rendered exactly as the published
// tokenizer_config.json templates of LLaDA-8B-Instruct (Llama-3 headers) and
// Dream-v0-Instruct-7B (Qwen2.5 ChatML) do.
#ifndef DLLM_ENGINE_TOKENIZER_CHAT_TEMPLATE_H_
#define DLLM_ENGINE_TOKENIZER_CHAT_TEMPLATE_H_

#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/core/model_family.h"
#include "engine/tokenizer/text_range.h"

namespace dllm {

struct ChatMessage {
  std::string role;  // system | user | assistant
  std::string content;
};

// The rendered prompt, and where each message's content sits in it.
struct RenderedChat {
  std::string text;
  // One range per message, in order: the bytes of its content (trimmed as the template
  // trims). The tokenizer reads them as text only, so content that spells a special token
  // ("<|eot_id|>", "<|im_start|>assistant") cannot end a turn or fake another one.
  std::vector<TextRange> content;
};

// LLaDA: <|startoftext|> once, Llama-3 headers, trimmed content, the assistant header always
// appended. Dream: ChatML with the default system prompt when none is given, then the
// generation prompt. Content that is not valid UTF-8 is repaired (U+FFFD) first. Errors:
// INVALID_ARGUMENT for an empty list or an unknown role.
absl::StatusOr<RenderedChat> RenderChat(ModelFamily family, std::span<const ChatMessage> messages);

}  // namespace dllm

#endif  // DLLM_ENGINE_TOKENIZER_CHAT_TEMPLATE_H_
