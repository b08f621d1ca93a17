// Tokenizer: byte-level BPE as used by both model families, loaded from the model folder.
//
// Formats: tokenizer.json (HF fast format: model.vocab/merges, added_tokens, normalizer,
// pre_tokenizer, decoder) or vocab.json + merges.txt with added tokens from
// tokenizer_config.json `added_tokens_decoder` / added_tokens.json (HF slow format).
// Pipeline: split out added tokens (longest match) → normalize (NFC where configured) →
// regex pre-tokenize (PCRE2) → byte-level map → BPE by merge rank (cached) → ids.
//
// Thread-safety: Encode/Decode are safe to call concurrently (the BPE cache is internally
// synchronized). Immutable otherwise.
#ifndef DLLM_ENGINE_TOKENIZER_TOKENIZER_H_
#define DLLM_ENGINE_TOKENIZER_TOKENIZER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/tokenizer/text_range.h"

namespace dllm {

class Tokenizer {
 public:
  // Loads from a model folder: tokenizer.json if present, else vocab.json + merges.txt.
  static absl::StatusOr<std::unique_ptr<Tokenizer>> LoadFromDir(const std::string& model_dir);
  virtual ~Tokenizer() = default;

  // Added/special tokens written literally in `text` become their ids, except that special
  // tokens overlapping a `text_only` range are read as ordinary text: chat content a user
  // typed can spell "<|eot_id|>" but never end its turn or fake another.
  virtual std::vector<int32_t> Encode(std::string_view text,
                                      std::span<const TextRange> text_only) const = 0;
  std::vector<int32_t> Encode(std::string_view text) const { return Encode(text, {}); }

  // Invalid UTF-8 is replaced with U+FFFD. Special tokens are dropped when skip_special.
  virtual std::string Decode(std::span<const int32_t> ids, bool skip_special) const = 0;

  // The raw bytes a token stands for (after the byte decoder); empty for unknown ids.
  virtual std::string TokenBytes(int32_t id) const = 0;

  virtual std::optional<int32_t> TokenToId(std::string_view token) const = 0;
  virtual bool IsSpecial(int32_t id) const = 0;
  // One past the largest id the tokenizer knows (base vocab plus added tokens).
  virtual int32_t size() const = 0;
};

}  // namespace dllm

#endif  // DLLM_ENGINE_TOKENIZER_TOKENIZER_H_
