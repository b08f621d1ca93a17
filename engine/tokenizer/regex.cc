#include "engine/tokenizer/regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "absl/strings/str_cat.h"
#include "engine/tokenizer/utf8.h"

namespace dllm {
namespace {

pcre2_code* AsCode(void* p) { return static_cast<pcre2_code*>(p); }

std::string Pcre2Message(int code) {
  PCRE2_UCHAR buffer[256];
  if (pcre2_get_error_message(code, buffer, sizeof(buffer)) < 0) {
    return absl::StrCat("PCRE2 error ", code);
  }
  return reinterpret_cast<const char*>(buffer);
}

// Owns a match data block and (lazily) a larger JIT stack for one FindAll call.
struct MatchScratch {
  pcre2_match_data* data = nullptr;
  pcre2_match_context* context = nullptr;
  pcre2_jit_stack* jit_stack = nullptr;
  ~MatchScratch() {
    if (jit_stack != nullptr) pcre2_jit_stack_free(jit_stack);
    if (context != nullptr) pcre2_match_context_free(context);
    if (data != nullptr) pcre2_match_data_free(data);
  }
};

}  // namespace

std::string ExpandWhitespaceEscapes(std::string_view pattern) {
  // The Unicode White_Space code points, spelled for use inside a character class.
  static constexpr std::string_view kWhiteSpace =
      R"(\t\n\x{0B}\f\r\x{20}\x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F})"
      R"(\x{205F}\x{3000})";
  std::string out;
  out.reserve(pattern.size() + 64);
  bool in_class = false;
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      const char next = pattern[i + 1];
      ++i;
      if (next == 's') {
        if (in_class) {
          out += kWhiteSpace;
        } else {
          absl::StrAppend(&out, "[", AbslView(kWhiteSpace), "]");
        }
      } else if (next == 'S' && !in_class) {
        absl::StrAppend(&out, "[^", AbslView(kWhiteSpace), "]");
      } else if (next == 'Q') {
        // \Q...\E quotes literally: copy it through untouched.
        const size_t end = pattern.find("\\E", i + 1);
        const size_t stop = end == std::string_view::npos ? pattern.size() : end + 2;
        out.append(pattern.substr(i - 1, stop - (i - 1)));
        i = stop - 1;
      } else {
        out += c;
        out += next;
      }
      continue;
    }
    if (!in_class && c == '[') {
      in_class = true;
      out += c;
      // A ']' right after '[' or '[^' is a literal member, not the end of the class.
      if (i + 1 < pattern.size() && pattern[i + 1] == '^') out += pattern[++i];
      if (i + 1 < pattern.size() && pattern[i + 1] == ']') out += pattern[++i];
      continue;
    }
    if (in_class && c == '[' && i + 1 < pattern.size() && pattern[i + 1] == ':') {
      const size_t end = pattern.find(":]", i + 2);
      if (end != std::string_view::npos) {
        out.append(pattern.substr(i, end + 2 - i));
        i = end + 1;
        continue;
      }
    }
    if (in_class && c == ']') in_class = false;
    out += c;
  }
  return out;
}

absl::StatusOr<std::unique_ptr<UnicodeRegex>> UnicodeRegex::Compile(std::string_view pattern) {
  const std::string expanded = ExpandWhitespaceEscapes(pattern);
  int error_code = 0;
  PCRE2_SIZE error_offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(expanded.data()), expanded.size(),
                                   PCRE2_UTF | PCRE2_UCP, &error_code, &error_offset, nullptr);
  if (code == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("bad regex /", std::string(pattern),
                                                   "/: ", Pcre2Message(error_code),
                                                   " (near offset ", error_offset, ")"));
  }
  // JIT is an optimisation only; the interpreter gives the same matches if it is missing.
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
  auto regex = std::unique_ptr<UnicodeRegex>(new UnicodeRegex());
  regex->pattern_ = std::string(pattern);
  regex->code_ = code;
  return regex;
}

UnicodeRegex::~UnicodeRegex() {
  if (code_ != nullptr) pcre2_code_free(AsCode(code_));
}

absl::Status UnicodeRegex::FindAll(std::string_view text,
                                   std::vector<std::pair<size_t, size_t>>* matches) const {
  pcre2_code* code = AsCode(code_);
  MatchScratch scratch;
  scratch.data = pcre2_match_data_create_from_pattern(code, nullptr);
  if (scratch.data == nullptr) return absl::ResourceExhaustedError("out of memory for regex");
  const auto subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t start = 0;
  uint32_t options = 0;
  while (start <= text.size()) {
    int rc = pcre2_match(code, subject, text.size(), start, options | PCRE2_NO_UTF_CHECK,
                         scratch.data, scratch.context);
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT && scratch.jit_stack == nullptr) {
      // The default 32 KiB JIT stack is small for long inputs; retry once with a big one.
      scratch.context = pcre2_match_context_create(nullptr);
      scratch.jit_stack =
          pcre2_jit_stack_create(size_t{32} * 1024, size_t{64} * 1024 * 1024, nullptr);
      if (scratch.context == nullptr || scratch.jit_stack == nullptr) {
        return absl::ResourceExhaustedError("out of memory for regex JIT stack");
      }
      pcre2_jit_stack_assign(scratch.context, nullptr, scratch.jit_stack);
      continue;
    }
    if (rc == PCRE2_ERROR_NOMATCH) {
      if (options == 0) break;
      // No non-empty match at `start` after an empty one: step over one character.
      options = 0;
      ++start;
      while (start < text.size() && (static_cast<uint8_t>(text[start]) & 0xC0) == 0x80) ++start;
      continue;
    }
    if (rc < 0) {
      return absl::ResourceExhaustedError(
          absl::StrCat("regex /", pattern_, "/ failed: ", Pcre2Message(rc)));
    }
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(scratch.data);
    const size_t match_start = ovector[0];
    const size_t match_end = ovector[1];
    matches->emplace_back(match_start, match_end);
    start = match_end;
    // After an empty match, look for a non-empty one at the same place before moving on
    // (Perl's rule, which Oniguruma's find_iter also follows in effect).
    options = match_start == match_end ? (PCRE2_NOTEMPTY_ATSTART | PCRE2_ANCHORED) : 0;
    if (start == text.size() && match_start == match_end) break;
  }
  return absl::OkStatus();
}

}  // namespace dllm
