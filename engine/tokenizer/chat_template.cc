#include "engine/tokenizer/chat_template.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "engine/tokenizer/utf8.h"

namespace dllm {
namespace {

bool IsKnownRole(const std::string& role) {
  return role == "system" || role == "user" || role == "assistant";
}

// Jinja's `trim` is Python's str.strip(): it removes Unicode whitespace, not just ASCII.
std::string_view TrimUnicodeWhitespace(std::string_view text) {
  auto whitespace_at_end = [&](bool front) -> size_t {
    // Length in bytes of one whitespace character at the front/back of `text`, or 0.
    static constexpr std::string_view kMultiByte[] = {
        "\xC2\x85",     "\xC2\xA0",     "\xE1\x9A\x80", "\xE2\x80\x80", "\xE2\x80\x81",
        "\xE2\x80\x82", "\xE2\x80\x83", "\xE2\x80\x84", "\xE2\x80\x85", "\xE2\x80\x86",
        "\xE2\x80\x87", "\xE2\x80\x88", "\xE2\x80\x89", "\xE2\x80\x8A", "\xE2\x80\xA8",
        "\xE2\x80\xA9", "\xE2\x80\xAF", "\xE2\x81\x9F", "\xE3\x80\x80"};
    if (text.empty()) return 0;
    const char c = front ? text.front() : text.back();
    // Python's str.isspace() also counts the separators \x1c-\x1f.
    if (c == ' ' || (c >= '\t' && c <= '\r') || (c >= '\x1c' && c <= '\x1f')) return 1;
    for (const std::string_view ws : kMultiByte) {
      if (front ? text.starts_with(ws) : text.ends_with(ws)) return ws.size();
    }
    return 0;
  };
  while (const size_t n = whitespace_at_end(true)) text.remove_prefix(n);
  while (const size_t n = whitespace_at_end(false)) text.remove_suffix(n);
  return text;
}

}  // namespace

absl::StatusOr<RenderedChat> RenderChat(ModelFamily family, std::span<const ChatMessage> messages) {
  if (messages.empty()) return absl::InvalidArgumentError("chat has no messages");
  for (size_t i = 0; i < messages.size(); ++i) {
    if (!IsKnownRole(messages[i].role)) {
      return absl::InvalidArgumentError(absl::StrCat("message ", i, " has unknown role \"",
                                                     messages[i].role,
                                                     "\" (expected system, user or assistant)"));
    }
  }
  RenderedChat out;
  auto append_content = [&out](std::string_view content) {
    const std::string repaired = IsValidUtf8(content) ? std::string() : ToValidUtf8(content);
    if (!repaired.empty()) content = repaired;
    const size_t begin = out.text.size();
    out.text.append(content);
    out.content.push_back(TextRange{begin, out.text.size()});
  };
  switch (FamilyInfo(family).chat_template) {
    case ChatTemplateKind::kLlama3Headers:
      // tokenizer_config.json chat_template: BOS before the first message, Llama-3 headers,
      // `content | trim`, and the assistant header appended unconditionally.
      for (size_t i = 0; i < messages.size(); ++i) {
        if (i == 0) out.text += "<|startoftext|>";
        absl::StrAppend(&out.text, "<|start_header_id|>", messages[i].role,
                        "<|end_header_id|>\n\n");
        append_content(TrimUnicodeWhitespace(messages[i].content));
        out.text += "<|eot_id|>";
      }
      out.text += "<|start_header_id|>assistant<|end_header_id|>\n\n";
      return out;
    case ChatTemplateKind::kChatMl:
      // Qwen2.5 ChatML: default system prompt unless the chat starts with one; content is
      // not trimmed; add_generation_prompt is always on for serving.
      if (messages.front().role != "system") {
        out.text += "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n";
      }
      for (const ChatMessage& message : messages) {
        absl::StrAppend(&out.text, "<|im_start|>", message.role, "\n");
        append_content(message.content);
        out.text += "<|im_end|>\n";
      }
      out.text += "<|im_start|>assistant\n";
      return out;
  }
  return absl::InvalidArgumentError("unknown model family");
}

}  // namespace dllm
