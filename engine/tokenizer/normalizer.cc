#include "engine/tokenizer/normalizer.h"

#include <utf8proc.h>

#include <cstdlib>

#include "absl/strings/str_cat.h"

namespace dllm {
namespace {

absl::Status AppendSteps(const nlohmann::json& config, std::vector<UnicodeForm>* steps) {
  if (config.is_null()) return absl::OkStatus();
  if (!config.is_object() || !config.contains("type") || !config["type"].is_string()) {
    return absl::InvalidArgumentError("normalizer: expected an object with a string \"type\"");
  }
  const std::string type = config["type"].get<std::string>();
  if (type == "NFC") {
    steps->push_back(UnicodeForm::kNfc);
  } else if (type == "NFD") {
    steps->push_back(UnicodeForm::kNfd);
  } else if (type == "NFKC") {
    steps->push_back(UnicodeForm::kNfkc);
  } else if (type == "NFKD") {
    steps->push_back(UnicodeForm::kNfkd);
  } else if (type == "Sequence") {
    if (!config.contains("normalizers") || !config["normalizers"].is_array()) {
      return absl::InvalidArgumentError("normalizer Sequence: missing \"normalizers\" array");
    }
    for (const auto& child : config["normalizers"]) {
      if (absl::Status s = AppendSteps(child, steps); !s.ok()) return s;
    }
  } else {
    return absl::InvalidArgumentError(absl::StrCat("normalizer type \"", type,
                                                   "\" is not supported (NFC, NFD, NFKC, "
                                                   "NFKD, Sequence or null)"));
  }
  return absl::OkStatus();
}

utf8proc_option_t OptionsFor(UnicodeForm form) {
  switch (form) {
    case UnicodeForm::kNfc:
      return static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE);
    case UnicodeForm::kNfd:
      return static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_DECOMPOSE);
    case UnicodeForm::kNfkc:
      return static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE | UTF8PROC_COMPAT);
    case UnicodeForm::kNfkd:
      return static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT);
  }
  return UTF8PROC_STABLE;
}

bool IsAscii(std::string_view text) {
  for (const char c : text) {
    if (static_cast<unsigned char>(c) >= 0x80) return false;
  }
  return true;
}

}  // namespace

absl::StatusOr<TextNormalizer> TextNormalizer::FromJson(const nlohmann::json& config) {
  std::vector<UnicodeForm> steps;
  if (absl::Status s = AppendSteps(config, &steps); !s.ok()) return s;
  return TextNormalizer(std::move(steps));
}

std::string TextNormalizer::Normalize(std::string_view text) const {
  // ASCII text is invariant under all four forms; skipping utf8proc saves an allocation.
  std::string current(text);
  if (steps_.empty() || IsAscii(text)) return current;
  for (const UnicodeForm form : steps_) {
    utf8proc_uint8_t* result = nullptr;
    const utf8proc_ssize_t len =
        utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(current.data()),
                     static_cast<utf8proc_ssize_t>(current.size()), &result, OptionsFor(form));
    // utf8proc fails only on invalid UTF-8 or out of memory; callers pass valid UTF-8, and
    // leaving the text unnormalised is the safe fallback.
    if (len < 0 || result == nullptr) continue;
    current.assign(reinterpret_cast<const char*>(result), static_cast<size_t>(len));
    std::free(result);
  }
  return current;
}

}  // namespace dllm
