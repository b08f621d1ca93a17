// UTF-8 helpers for the tokenizer: code point iteration and lossy decoding.
//
// The replacement rule is the WHATWG/Unicode "maximal subpart" practice, which is what
// Python's bytes.decode(errors="replace") and JavaScript's TextDecoder both implement, so a
// decoded string matches the reference tokenizers byte for byte.
#ifndef DLLM_ENGINE_TOKENIZER_UTF8_H_
#define DLLM_ENGINE_TOKENIZER_UTF8_H_

#include <cstddef>
#include <string>
#include <string_view>

#include "absl/strings/string_view.h"

namespace dllm {

inline constexpr char32_t kReplacementChar = 0xFFFD;

// Debian's abseil has its own string_view type; this bridges std::string_view into absl APIs.
inline absl::string_view AbslView(std::string_view s) { return {s.data(), s.size()}; }

// Appends the UTF-8 encoding of `cp` (must be a scalar value <= 0x10FFFF) to `out`.
void AppendUtf8(char32_t cp, std::string* out);

// Length in bytes of the valid UTF-8 sequence that starts at `text[pos]`, or 0 if the bytes
// there are not a valid, complete, shortest-form sequence. Requires pos < text.size().
size_t ValidUtf8SequenceLength(std::string_view text, size_t pos);

// Decodes the code point of the valid sequence at `text[pos]` whose length is `len`.
char32_t DecodeUtf8At(std::string_view text, size_t pos, size_t len);

// True when `text` is entirely valid UTF-8.
bool IsValidUtf8(std::string_view text);

// Returns `bytes` with every maximal invalid subpart replaced by U+FFFD.
std::string ToValidUtf8(std::string_view bytes);

}  // namespace dllm

#endif  // DLLM_ENGINE_TOKENIZER_UTF8_H_
