#include "engine/tokenizer/added_tokens.h"

#include <utf8proc.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "engine/tokenizer/utf8.h"

namespace dllm {
namespace {

bool IsWordChar(char32_t cp) {
  if (cp == '_') return true;
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(cp))) {
    case UTF8PROC_CATEGORY_LU:
    case UTF8PROC_CATEGORY_LL:
    case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO:
    case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_NL:
    case UTF8PROC_CATEGORY_NO:
      return true;
    default:
      return false;
  }
}

// Code point that ends just before byte `end` of valid UTF-8 `text` (end > 0).
char32_t CodePointBefore(std::string_view text, size_t end, size_t* start) {
  size_t pos = end - 1;
  while (pos > 0 && (static_cast<uint8_t>(text[pos]) & 0xC0) == 0x80) --pos;
  *start = pos;
  return DecodeUtf8At(text, pos, end - pos);
}

char32_t CodePointAt(std::string_view text, size_t pos, size_t* length) {
  *length = ValidUtf8SequenceLength(text, pos);
  if (*length == 0) *length = 1;
  return DecodeUtf8At(text, pos, *length);
}

}  // namespace

bool IsUnicodeWhitespace(char32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F ||
         cp == 0x205F || cp == 0x3000;
}

absl::StatusOr<AddedTokenSet> AddedTokenSet::Create(std::vector<AddedToken> tokens) {
  AddedTokenSet set;
  set.trie_.emplace_back();
  for (size_t i = 0; i < tokens.size(); ++i) {
    const AddedToken& token = tokens[i];
    if (token.content.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("added token id ", token.id, " has empty content"));
    }
    if (token.id < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("added token \"", token.content, "\" has negative id ", token.id));
    }
    int32_t node = 0;
    for (const char c : token.content) {
      const auto byte = static_cast<uint8_t>(c);
      const auto it = set.trie_[node].children.find(byte);
      if (it != set.trie_[node].children.end()) {
        node = it->second;
        continue;
      }
      const auto child = static_cast<int32_t>(set.trie_.size());
      set.trie_[node].children.emplace(byte, child);
      set.trie_.emplace_back();
      node = child;
    }
    const int32_t existing = set.trie_[node].token;
    if (existing >= 0 && tokens[existing].id != token.id) {
      return absl::InvalidArgumentError(absl::StrCat("added token \"", token.content,
                                                     "\" is given two ids: ", tokens[existing].id,
                                                     " and ", token.id));
    }
    if (existing < 0) set.trie_[node].token = static_cast<int32_t>(i);
  }
  set.tokens_ = std::move(tokens);
  return set;
}

std::vector<AddedTokenSet::Segment> AddedTokenSet::Split(
    std::string_view text, std::span<const TextRange> text_only) const {
  std::vector<Segment> out;
  if (tokens_.empty()) {
    if (!text.empty()) out.push_back({text, -1});
    return out;
  }
  size_t plain_start = 0;  // start of the pending plain segment
  size_t pos = 0;
  while (pos < text.size()) {
    // Longest token starting at `pos`.
    int32_t node = 0;
    int32_t best = -1;
    size_t best_end = 0;
    for (size_t i = pos; i < text.size(); ++i) {
      const auto it = trie_[node].children.find(static_cast<uint8_t>(text[i]));
      if (it == trie_[node].children.end()) break;
      node = it->second;
      if (trie_[node].token >= 0) {
        best = trie_[node].token;
        best_end = i + 1;
      }
    }
    if (best < 0) {
      ++pos;
      continue;
    }
    const AddedToken& token = tokens_[best];
    if (token.special && std::any_of(text_only.begin(), text_only.end(), [&](const TextRange& r) {
          return r.Overlaps(pos, best_end);
        })) {
      ++pos;  // e.g. "<|eot_id|>" typed by a user: text, never a turn boundary
      continue;
    }
    size_t start = pos;
    size_t end = best_end;
    if (token.single_word) {
      size_t unused = 0;
      const bool word_before = start > 0 && IsWordChar(CodePointBefore(text, start, &unused));
      const bool word_after = end < text.size() && IsWordChar(CodePointAt(text, end, &unused));
      if (word_before || word_after) {
        ++pos;
        continue;
      }
    }
    if (token.lstrip) {
      while (start > plain_start) {
        size_t prev = 0;
        if (!IsUnicodeWhitespace(CodePointBefore(text, start, &prev))) break;
        start = prev;
      }
    }
    if (token.rstrip) {
      while (end < text.size()) {
        size_t len = 0;
        if (!IsUnicodeWhitespace(CodePointAt(text, end, &len))) break;
        end += len;
      }
    }
    if (start > plain_start) out.push_back({text.substr(plain_start, start - plain_start), -1});
    out.push_back({text.substr(start, end - start), token.id});
    plain_start = end;
    pos = end;
  }
  if (plain_start < text.size()) out.push_back({text.substr(plain_start), -1});
  return out;
}

}  // namespace dllm
