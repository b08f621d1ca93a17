#include "engine/tokenizer/pretokenizer.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace dllm {
namespace {

struct Span {
  size_t start;
  size_t end;
  bool flag;  // is a match (before the behavior), or "drop" (after it)
};

absl::StatusOr<SplitBehavior> ParseBehavior(const std::string& name) {
  if (name == "Removed") return SplitBehavior::kRemoved;
  if (name == "Isolated") return SplitBehavior::kIsolated;
  if (name == "MergedWithPrevious") return SplitBehavior::kMergedWithPrevious;
  if (name == "MergedWithNext") return SplitBehavior::kMergedWithNext;
  if (name == "Contiguous") return SplitBehavior::kContiguous;
  return absl::InvalidArgumentError(
      absl::StrCat("pre_tokenizer Split: unknown behavior \"", name, "\""));
}

bool BoolField(const nlohmann::json& config, const char* key, bool fallback) {
  const auto it = config.find(key);
  return it != config.end() && it->is_boolean() ? it->get<bool>() : fallback;
}

// Covers [0, size) with alternating non-match / match spans, as HF's Pattern::find_matches.
std::vector<Span> CoverWithMatches(const std::vector<std::pair<size_t, size_t>>& matches,
                                   size_t size) {
  std::vector<Span> spans;
  size_t prev = 0;
  for (const auto& [start, end] : matches) {
    if (start > prev) spans.push_back({prev, start, false});
    spans.push_back({start, end, true});
    prev = end;
  }
  if (prev < size) spans.push_back({prev, size, false});
  return spans;
}

// Applies HF's SplitDelimiterBehavior; the returned flag means "drop this span".
std::vector<Span> ApplyBehavior(std::vector<Span> spans, SplitBehavior behavior) {
  std::vector<Span> out;
  bool previous_match = false;
  switch (behavior) {
    case SplitBehavior::kIsolated:
      for (Span s : spans) out.push_back({s.start, s.end, false});
      return out;
    case SplitBehavior::kRemoved:
      return spans;
    case SplitBehavior::kContiguous:
      for (const Span& s : spans) {
        if (s.flag == previous_match && !out.empty()) {
          out.back().end = s.end;
        } else {
          out.push_back({s.start, s.end, false});
        }
        previous_match = s.flag;
      }
      return out;
    case SplitBehavior::kMergedWithPrevious:
      for (const Span& s : spans) {
        if (s.flag && !previous_match && !out.empty()) {
          out.back().end = s.end;
        } else {
          out.push_back({s.start, s.end, false});
        }
        previous_match = s.flag;
      }
      return out;
    case SplitBehavior::kMergedWithNext:
      for (auto it = spans.rbegin(); it != spans.rend(); ++it) {
        if (it->flag && !previous_match && !out.empty()) {
          out.back().start = it->start;
        } else {
          out.push_back({it->start, it->end, false});
        }
        previous_match = it->flag;
      }
      return {out.rbegin(), out.rend()};
  }
  return spans;
}

}  // namespace

absl::StatusOr<PreTokenizer::Step> PreTokenizer::ParseSplit(const nlohmann::json& config) {
  Step step;
  step.kind = Step::Kind::kSplit;
  const auto pattern = config.find("pattern");
  if (pattern == config.end() || !pattern->is_object()) {
    return absl::InvalidArgumentError("pre_tokenizer Split: missing \"pattern\" object");
  }
  if (pattern->contains("Regex") && (*pattern)["Regex"].is_string()) {
    absl::StatusOr<std::unique_ptr<UnicodeRegex>> regex =
        UnicodeRegex::Compile((*pattern)["Regex"].get<std::string>());
    if (!regex.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("pre_tokenizer Split: ", regex.status().message()));
    }
    step.regex = std::move(*regex);
  } else if (pattern->contains("String") && (*pattern)["String"].is_string()) {
    step.literal = (*pattern)["String"].get<std::string>();
  } else {
    return absl::InvalidArgumentError(
        "pre_tokenizer Split: \"pattern\" needs a string \"Regex\" or \"String\"");
  }
  const auto behavior = config.find("behavior");
  if (behavior == config.end() || !behavior->is_string()) {
    return absl::InvalidArgumentError("pre_tokenizer Split: missing string \"behavior\"");
  }
  absl::StatusOr<SplitBehavior> parsed = ParseBehavior(behavior->get<std::string>());
  if (!parsed.ok()) return parsed.status();
  step.behavior = *parsed;
  step.invert = BoolField(config, "invert", false);
  return step;
}

absl::StatusOr<PreTokenizer::Step> PreTokenizer::ParseByteLevel(const nlohmann::json& config) {
  Step step;
  step.kind = Step::Kind::kByteLevel;
  step.add_prefix_space = BoolField(config, "add_prefix_space", true);
  if (BoolField(config, "use_regex", true)) {
    absl::StatusOr<std::unique_ptr<UnicodeRegex>> regex = UnicodeRegex::Compile(kGpt2SplitPattern);
    if (!regex.ok()) return regex.status();
    step.regex = std::move(*regex);
  }
  return step;
}

absl::Status PreTokenizer::AppendSteps(const nlohmann::json& config, std::vector<Step>* steps) {
  if (!config.is_object() || !config.contains("type") || !config["type"].is_string()) {
    return absl::InvalidArgumentError("pre_tokenizer: expected an object with a string \"type\"");
  }
  const std::string type = config["type"].get<std::string>();
  if (type == "Sequence") {
    const auto children = config.find("pretokenizers");
    if (children == config.end() || !children->is_array()) {
      return absl::InvalidArgumentError("pre_tokenizer Sequence: missing \"pretokenizers\" array");
    }
    for (const auto& child : *children) {
      if (absl::Status s = AppendSteps(child, steps); !s.ok()) return s;
    }
    return absl::OkStatus();
  }
  absl::StatusOr<Step> step = type == "Split" ? ParseSplit(config)
                              : type == "ByteLevel"
                                  ? ParseByteLevel(config)
                                  : absl::StatusOr<Step>(absl::InvalidArgumentError(
                                        absl::StrCat("pre_tokenizer type \"", type,
                                                     "\" is not supported "
                                                     "(Split, ByteLevel or "
                                                     "Sequence)")));
  if (!step.ok()) return step.status();
  steps->push_back(std::move(*step));
  return absl::OkStatus();
}

absl::StatusOr<PreTokenizer> PreTokenizer::FromSteps(std::vector<Step> steps) {
  bool has_byte_level = false;
  for (const Step& step : steps) has_byte_level |= step.kind == Step::Kind::kByteLevel;
  if (!has_byte_level) {
    return absl::InvalidArgumentError(
        "pre_tokenizer has no ByteLevel step; only byte-level BPE is supported");
  }
  PreTokenizer pre;
  pre.steps_ = std::move(steps);
  return pre;
}

absl::StatusOr<PreTokenizer> PreTokenizer::FromJson(const nlohmann::json& config) {
  if (config.is_null()) {
    return absl::InvalidArgumentError(
        "pre_tokenizer is null; only byte-level BPE (a ByteLevel pre-tokenizer) is supported");
  }
  std::vector<Step> steps;
  if (absl::Status s = AppendSteps(config, &steps); !s.ok()) return s;
  return FromSteps(std::move(steps));
}

absl::StatusOr<PreTokenizer> PreTokenizer::RegexThenByteLevel(std::string_view regex) {
  absl::StatusOr<std::unique_ptr<UnicodeRegex>> compiled = UnicodeRegex::Compile(regex);
  if (!compiled.ok()) return compiled.status();
  std::vector<Step> steps(2);
  steps[0].kind = Step::Kind::kSplit;
  steps[0].regex = std::move(*compiled);
  steps[0].behavior = SplitBehavior::kIsolated;
  steps[1].kind = Step::Kind::kByteLevel;
  return FromSteps(std::move(steps));
}

void PreTokenizer::ApplySplit(const Step& step, const std::string& piece,
                              std::vector<std::string>* out) const {
  std::vector<std::pair<size_t, size_t>> matches;
  if (step.regex != nullptr) {
    if (!step.regex->FindAll(piece, &matches).ok()) {
      out->push_back(piece);
      return;
    }
  } else if (!step.literal.empty()) {
    for (size_t pos = piece.find(step.literal); pos != std::string::npos;
         pos = piece.find(step.literal, pos + step.literal.size())) {
      matches.emplace_back(pos, pos + step.literal.size());
    }
  }
  std::vector<Span> spans = CoverWithMatches(matches, piece.size());
  if (step.invert) {
    for (Span& s : spans) s.flag = !s.flag;
  }
  for (const Span& s : ApplyBehavior(std::move(spans), step.behavior)) {
    if (!s.flag && s.end > s.start) out->push_back(piece.substr(s.start, s.end - s.start));
  }
}

std::vector<std::string> PreTokenizer::Split(std::string_view text) const {
  std::vector<std::string> pieces;
  if (text.empty()) return pieces;
  pieces.emplace_back(text);
  std::vector<std::string> next;
  for (const Step& step : steps_) {
    next.clear();
    for (std::string& piece : pieces) {
      if (step.kind == Step::Kind::kSplit) {
        ApplySplit(step, piece, &next);
        continue;
      }
      if (step.add_prefix_space && piece.front() != ' ') piece.insert(piece.begin(), ' ');
      std::vector<std::string> parts;
      if (step.regex != nullptr) {
        Step gpt2;
        gpt2.regex = step.regex;
        ApplySplit(gpt2, piece, &parts);
      } else {
        parts.push_back(std::move(piece));
      }
      for (const std::string& part : parts) {
        std::string mapped;
        mapped.reserve(part.size() * 2);
        byte_map_.Encode(part, &mapped);
        next.push_back(std::move(mapped));
      }
    }
    pieces.swap(next);
  }
  return pieces;
}

}  // namespace dllm
