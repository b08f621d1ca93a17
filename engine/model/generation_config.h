// The generation defaults a model folder ships in generation_config.json (optional).
//
// Only the answer length is used: HF's `max_new_tokens`, or LLaDA-style `gen_length`. The
// shipped tiny models were trained for one fixed answer length, so serving them with any other
// default would silently degrade every request that does not set max_new_tokens.
#ifndef DLLM_ENGINE_MODEL_GENERATION_CONFIG_H_
#define DLLM_ENGINE_MODEL_GENERATION_CONFIG_H_

#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace dllm {

struct GenerationDefaults {
  std::optional<int> max_new_tokens;  // absent when the file or both keys are absent
};

// Parses generation_config.json text; `source` names the file in errors. A key that is present
// but not a positive integer is an error.
absl::StatusOr<GenerationDefaults> ParseGenerationConfig(std::string_view json_text,
                                                         std::string_view source);

// Reads <model_dir>/generation_config.json; a missing file gives empty defaults.
absl::StatusOr<GenerationDefaults> LoadGenerationConfig(const std::string& model_dir);

}  // namespace dllm

#endif  // DLLM_ENGINE_MODEL_GENERATION_CONFIG_H_
