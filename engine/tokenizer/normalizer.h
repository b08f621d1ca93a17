// TextNormalizer: the Unicode normalisation a tokenizer applies before pre-tokenising.
//
// Built from tokenizer.json's "normalizer" entry: null, NFC, NFD, NFKC, NFKD, or a Sequence
// of those. The slow Qwen2/Dream tokenizer always uses NFC. Added tokens are split out before
// normalisation, so only the text between them passes through here.
//
// Thread-safety: immutable after construction.
#ifndef DLLM_ENGINE_TOKENIZER_NORMALIZER_H_
#define DLLM_ENGINE_TOKENIZER_NORMALIZER_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace dllm {

enum class UnicodeForm { kNfc, kNfd, kNfkc, kNfkd };

class TextNormalizer {
 public:
  TextNormalizer() = default;  // identity
  explicit TextNormalizer(std::vector<UnicodeForm> steps) : steps_(std::move(steps)) {}

  // Parses a tokenizer.json "normalizer" value. Errors: INVALID_ARGUMENT for an unsupported
  // or malformed entry, naming its type.
  static absl::StatusOr<TextNormalizer> FromJson(const nlohmann::json& config);

  bool is_identity() const { return steps_.empty(); }

  // `text` must be valid UTF-8; the result is valid UTF-8.
  std::string Normalize(std::string_view text) const;

 private:
  std::vector<UnicodeForm> steps_;
};

}  // namespace dllm

#endif  // DLLM_ENGINE_TOKENIZER_NORMALIZER_H_
