// Parsers for the two on-disk tokenizer formats. Every error names the file and the problem
// (missing file, malformed JSON, wrong field type, merge with an unknown token, bad regex).
//
//  * tokenizer.json (HF fast format): model.vocab, model.merges ("a b" strings or [a, b]
//    pairs), model.ignore_merges, added_tokens, normalizer, pre_tokenizer, decoder, all read
//    from the file. Entries of tokenizer_config.json `added_tokens_decoder` whose ids are
//    missing from tokenizer.json are added, as transformers does.
//  * vocab.json + merges.txt (HF slow Qwen2/Dream format): added tokens from
//    tokenizer_config.json `added_tokens_decoder` and/or added_tokens.json; NFC normalisation
//    and the Qwen2 split regex (GPT-2's regex and no normalisation for tokenizer_class
//    GPT2Tokenizer).
#ifndef DLLM_ENGINE_TOKENIZER_FILES_H_
#define DLLM_ENGINE_TOKENIZER_FILES_H_

#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "engine/tokenizer/bpe.h"

namespace dllm {

// The split regex of Qwen2Tokenizer (and Dream's copy of it).
inline constexpr std::string_view kQwen2SplitPattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// Parses tokenizer.json text; `source` names it in errors. `config_json` is the text of
// tokenizer_config.json or empty.
absl::StatusOr<std::unique_ptr<BpeTokenizer>> ParseTokenizerJson(
    std::string_view json_text, std::string_view source, std::string_view config_json = "",
    std::string_view config_source = "tokenizer_config.json");

// Loads <dir>/tokenizer.json (plus <dir>/tokenizer_config.json when present).
absl::StatusOr<std::unique_ptr<BpeTokenizer>> LoadTokenizerJson(const std::string& dir);

// Loads <dir>/vocab.json, <dir>/merges.txt and the added tokens of
// <dir>/tokenizer_config.json and <dir>/added_tokens.json (each optional).
absl::StatusOr<std::unique_ptr<BpeTokenizer>> LoadVocabAndMerges(const std::string& dir);

}  // namespace dllm

#endif  // DLLM_ENGINE_TOKENIZER_FILES_H_
