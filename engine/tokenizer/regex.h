// UnicodeRegex: a PCRE2 pattern compiled in UTF + UCP mode, used by the pre-tokenizers.
//
// HF tokenizer.json patterns are Oniguruma patterns; the ones tokenizers use (\p{L}, \p{N},
// (?i:...), possessive quantifiers, lookahead) mean the same in PCRE2 with one exception
// that Compile() rewrites: Oniguruma's \s is exactly the Unicode White_Space property, while
// PCRE2's \s in UCP mode also matches U+180E (MONGOLIAN VOWEL SEPARATOR, whitespace before
// Unicode 6.3). \s and \S (outside classes) are spelled out as the White_Space list.
//
// Thread-safety: immutable after Compile(); FindAll may be called concurrently.
#ifndef DLLM_ENGINE_TOKENIZER_REGEX_H_
#define DLLM_ENGINE_TOKENIZER_REGEX_H_

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace dllm {

class UnicodeRegex {
 public:
  // Errors: INVALID_ARGUMENT with PCRE2's message and the offset of the problem.
  static absl::StatusOr<std::unique_ptr<UnicodeRegex>> Compile(std::string_view pattern);
  ~UnicodeRegex();
  UnicodeRegex(const UnicodeRegex&) = delete;
  UnicodeRegex& operator=(const UnicodeRegex&) = delete;

  // Appends the [start, end) byte offsets of all non-overlapping matches, left to right, to
  // `matches`. `text` must be valid UTF-8 (not re-checked). Errors: RESOURCE_EXHAUSTED when
  // PCRE2 gives up (match or depth limit) on a pathological input.
  absl::Status FindAll(std::string_view text,
                       std::vector<std::pair<size_t, size_t>>* matches) const;

  const std::string& pattern() const { return pattern_; }

 private:
  UnicodeRegex() = default;
  std::string pattern_;   // as given, for messages
  void* code_ = nullptr;  // pcre2_code_8*, kept opaque so callers need no PCRE2 headers
};

// Exposed for tests: the pattern with \s (and \S outside classes) replaced by the explicit
// Unicode White_Space set.
std::string ExpandWhitespaceEscapes(std::string_view pattern);

}  // namespace dllm

#endif  // DLLM_ENGINE_TOKENIZER_REGEX_H_
