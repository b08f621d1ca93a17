// AddedTokenSet: the tokens a tokenizer matches as whole strings before any BPE (special
// tokens like <|im_end|> and plain added tokens like <tool_call>).
//
// Split() cuts text at every occurrence, leftmost first and longest at a position (HF's
// leftmost-longest Aho-Corasick rule), honouring each token's lstrip/rstrip (absorb the
// whitespace beside it) and single_word (match only between non-word characters) flags.
//
// Thread-safety: immutable after Create().
#ifndef DLLM_ENGINE_TOKENIZER_ADDED_TOKENS_H_
#define DLLM_ENGINE_TOKENIZER_ADDED_TOKENS_H_

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "engine/tokenizer/text_range.h"

namespace dllm {

struct AddedToken {
  int32_t id = -1;
  std::string content;
  bool special = false;
  bool lstrip = false;
  bool rstrip = false;
  bool single_word = false;
  bool normalized = false;  // matched on normalised text (tokenizer.json only)
};

class AddedTokenSet {
 public:
  // A piece of text: an added token (id >= 0) or plain text between them (id == -1).
  struct Segment {
    std::string_view text;
    int32_t id;
  };

  AddedTokenSet() = default;

  // Errors: INVALID_ARGUMENT for empty content, a negative id, or one content given two
  // different ids.
  static absl::StatusOr<AddedTokenSet> Create(std::vector<AddedToken> tokens);

  // Splits `text` (valid UTF-8) into segments that concatenate back to `text`, except for
  // whitespace absorbed by lstrip/rstrip tokens. Plain segments are never empty. A special
  // token is not matched where it overlaps one of `text_only` (byte ranges of untrusted
  // text, such as chat content); plain added tokens are matched everywhere.
  std::vector<Segment> Split(std::string_view text,
                             std::span<const TextRange> text_only = {}) const;

  bool empty() const { return tokens_.empty(); }
  const std::vector<AddedToken>& tokens() const { return tokens_; }

 private:
  struct Node {
    absl::flat_hash_map<uint8_t, int32_t> children;
    int32_t token = -1;  // index into tokens_ when a token ends here
  };
  std::vector<AddedToken> tokens_;
  std::vector<Node> trie_;
};

// True for code points with the Unicode White_Space property.
bool IsUnicodeWhitespace(char32_t cp);

}  // namespace dllm

#endif  // DLLM_ENGINE_TOKENIZER_ADDED_TOKENS_H_
