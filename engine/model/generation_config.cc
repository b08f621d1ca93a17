#include "engine/model/generation_config.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/core/file_text.h"
#include "engine/core/status_macros.h"

namespace dllm {

absl::StatusOr<GenerationDefaults> ParseGenerationConfig(std::string_view json_text,
                                                         std::string_view source) {
  const nlohmann::json j = nlohmann::json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(std::string(source), ": not a JSON object"));
  }
  GenerationDefaults out;
  for (const char* key : {"max_new_tokens", "gen_length"}) {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) continue;
    if (!it->is_number_integer() || it->get<int64_t>() < 1 || it->get<int64_t>() > (1 << 20)) {
      return absl::InvalidArgumentError(absl::StrCat(
          std::string(source), ": ", key, " must be a positive integer, got ", it->dump()));
    }
    out.max_new_tokens = static_cast<int>(it->get<int64_t>());
    break;
  }
  return out;
}

absl::StatusOr<GenerationDefaults> LoadGenerationConfig(const std::string& model_dir) {
  const std::filesystem::path path = std::filesystem::path(model_dir) / "generation_config.json";
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return GenerationDefaults{};
  // A generation_config.json is a few hundred bytes; 1 MiB leaves room for any real one.
  DLLM_ASSIGN_OR_RETURN(text, ReadFileText(path.string(), uint64_t{1} << 20));
  return ParseGenerationConfig(text, path.string());
}

}  // namespace dllm
