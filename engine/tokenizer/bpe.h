// BpeTokenizer: the Tokenizer implementation, composed of the loaded parts.
//
// Encode: split out added tokens that match raw text (longest first) → normalise the rest →
// split out added tokens that match normalised text → pre-tokenise (regex split + byte-level
// map) → BPE each piece. Invalid UTF-8 input is first repaired with U+FFFD, since every
// reference tokenizer takes a Unicode string. No BOS/EOS is added (HF post-processors are not
// applied: the references tokenize with add_special_tokens=False).
// Decode: each id's bytes (added tokens: their text; vocabulary tokens: through the byte-level
// decoder), concatenated, then invalid UTF-8 replaced with U+FFFD. Unknown ids are skipped.
//
// Thread-safety: as Tokenizer (Encode/Decode concurrent-safe; the BPE cache is locked).
#ifndef DLLM_ENGINE_TOKENIZER_BPE_H_
#define DLLM_ENGINE_TOKENIZER_BPE_H_

#include <memory>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "engine/tokenizer/added_tokens.h"
#include "engine/tokenizer/bpe_model.h"
#include "engine/tokenizer/byte_level.h"
#include "engine/tokenizer/normalizer.h"
#include "engine/tokenizer/pretokenizer.h"
#include "engine/tokenizer/tokenizer.h"

namespace dllm {

struct BpeTokenizerParts {
  std::unique_ptr<BpeModel> model;
  TextNormalizer normalizer;
  PreTokenizer pre_tokenizer;
  std::vector<AddedToken> added_tokens;
};

class BpeTokenizer final : public Tokenizer {
 public:
  // Errors: INVALID_ARGUMENT for a missing model or inconsistent added tokens.
  static absl::StatusOr<std::unique_ptr<BpeTokenizer>> Create(BpeTokenizerParts parts);

  using Tokenizer::Encode;
  std::vector<int32_t> Encode(std::string_view text,
                              std::span<const TextRange> text_only) const override;
  std::string Decode(std::span<const int32_t> ids, bool skip_special) const override;
  std::string TokenBytes(int32_t id) const override;
  // Added tokens by their text ("<|mask|>"); vocabulary tokens by their byte-level spelling
  // ("Ġthe" for " the").
  std::optional<int32_t> TokenToId(std::string_view token) const override;
  bool IsSpecial(int32_t id) const override;
  int32_t size() const override { return size_; }

  size_t merge_count() const { return model_->merge_count(); }
  size_t added_token_count() const { return added_by_id_.size(); }

 private:
  explicit BpeTokenizer(BpeTokenizerParts parts) : parts_(std::move(parts)) {}
  void EncodeNormalized(std::string_view text, std::vector<int32_t>* ids) const;
  // Appends the bytes of `id`; false for an unknown id or a special one being skipped.
  bool AppendTokenBytes(int32_t id, bool skip_special, std::string* out) const;

  BpeTokenizerParts parts_;
  const BpeModel* model_ = nullptr;
  AddedTokenSet raw_added_;         // matched before normalisation
  AddedTokenSet normalized_added_;  // matched after it
  absl::flat_hash_map<int32_t, const AddedToken*> added_by_id_;
  absl::flat_hash_map<std::string, int32_t> added_by_content_;
  ByteLevelMap byte_map_;
  int32_t size_ = 0;
};

}  // namespace dllm

#endif  // DLLM_ENGINE_TOKENIZER_BPE_H_
