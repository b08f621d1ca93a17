// PreTokenizer: splits normalised text into the pieces that BPE encodes one by one, and maps
// their bytes to GPT-2's byte-level alphabet.
//
// Built from tokenizer.json's "pre_tokenizer": a Split (Regex or String pattern, behavior,
// invert), a ByteLevel (add_prefix_space, use_regex with the GPT-2 pattern), or a Sequence of
// those, applied in order as HF tokenizers does. The chain must contain a ByteLevel step,
// since the model is byte-level BPE. The slow Qwen2/Dream format is Split(regex, Isolated)
// followed by a plain ByteLevel.
//
// Thread-safety: immutable after construction; Split may be called concurrently.
#ifndef DLLM_ENGINE_TOKENIZER_PRETOKENIZER_H_
#define DLLM_ENGINE_TOKENIZER_PRETOKENIZER_H_

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/tokenizer/byte_level.h"
#include "engine/tokenizer/regex.h"
#include "nlohmann/json.hpp"

namespace dllm {

// The GPT-2 split pattern that ByteLevel{use_regex: true} applies.
inline constexpr std::string_view kGpt2SplitPattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// What a Split step does with the text its pattern matches (HF SplitDelimiterBehavior).
enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

class PreTokenizer {
 public:
  // Split(regex, Isolated) then ByteLevel without prefix space or regex: the slow format.
  static absl::StatusOr<PreTokenizer> RegexThenByteLevel(std::string_view regex);

  // Parses a tokenizer.json "pre_tokenizer" value. Errors: INVALID_ARGUMENT naming the
  // unsupported type, the bad field, or the regex and PCRE2's complaint.
  static absl::StatusOr<PreTokenizer> FromJson(const nlohmann::json& config);

  // `text` must be valid UTF-8. Returns byte-level-mapped pieces, none empty. A regex that
  // PCRE2 gives up on (pathological input) leaves its piece unsplit rather than failing.
  std::vector<std::string> Split(std::string_view text) const;

 private:
  struct Step {
    enum class Kind { kSplit, kByteLevel } kind = Kind::kSplit;
    std::shared_ptr<const UnicodeRegex> regex;  // Split with a Regex pattern; ByteLevel
    std::string literal;                        // Split with a String pattern
    SplitBehavior behavior = SplitBehavior::kIsolated;
    bool invert = false;
    bool add_prefix_space = false;  // ByteLevel
  };

  static absl::Status AppendSteps(const nlohmann::json& config, std::vector<Step>* steps);
  static absl::StatusOr<Step> ParseSplit(const nlohmann::json& config);
  static absl::StatusOr<Step> ParseByteLevel(const nlohmann::json& config);
  static absl::StatusOr<PreTokenizer> FromSteps(std::vector<Step> steps);

  void ApplySplit(const Step& step, const std::string& piece, std::vector<std::string>* out) const;

  std::vector<Step> steps_;
  ByteLevelMap byte_map_;
};

}  // namespace dllm

#endif  // DLLM_ENGINE_TOKENIZER_PRETOKENIZER_H_
