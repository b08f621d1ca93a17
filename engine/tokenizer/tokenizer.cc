#include "engine/tokenizer/tokenizer.h"

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "engine/tokenizer/files.h"

namespace dllm {

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::LoadFromDir(const std::string& model_dir) {
  const std::filesystem::path dir(model_dir);
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) {
    return absl::NotFoundError(absl::StrCat(model_dir, ": tokenizer folder does not exist"));
  }
  absl::StatusOr<std::unique_ptr<BpeTokenizer>> tokenizer;
  if (std::filesystem::exists(dir / "tokenizer.json", ec)) {
    tokenizer = LoadTokenizerJson(model_dir);
  } else if (std::filesystem::exists(dir / "vocab.json", ec)) {
    tokenizer = LoadVocabAndMerges(model_dir);
  } else {
    return absl::NotFoundError(absl::StrCat(
        model_dir, ": no tokenizer.json and no vocab.json + merges.txt in this folder"));
  }
  if (!tokenizer.ok()) return tokenizer.status();
  return std::unique_ptr<Tokenizer>(std::move(*tokenizer));
}

}  // namespace dllm
