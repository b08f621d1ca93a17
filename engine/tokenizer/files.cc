#include "engine/tokenizer/files.h"

#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <sstream>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "engine/core/file_text.h"
#include "engine/tokenizer/utf8.h"
#include "nlohmann/json.hpp"

namespace dllm {
namespace {

using nlohmann::json;

absl::Status WithSource(const absl::Status& status, std::string_view source) {
  if (status.ok()) return status;
  return absl::Status(status.code(), absl::StrCat(AbslView(source), ": ", status.message()));
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  // LLaDA's and Dream's tokenizer.json are 4-11 MB; 256 MiB refuses only what is not one.
  return ReadFileText(path, uint64_t{256} << 20);
}

absl::StatusOr<json> ParseJson(std::string_view text, std::string_view source) {
  try {
    return json::parse(text.begin(), text.end());
  } catch (const json::exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(AbslView(source), ": malformed JSON: ", e.what()));
  }
}

bool BoolOr(const json& object, const char* key, bool fallback) {
  const auto it = object.find(key);
  return it != object.end() && it->is_boolean() ? it->get<bool>() : fallback;
}

absl::StatusOr<AddedToken> ParseAddedToken(const json& entry, int32_t id) {
  if (!entry.is_object()) return absl::InvalidArgumentError("added token is not an object");
  const auto content = entry.find("content");
  if (content == entry.end() || !content->is_string()) {
    return absl::InvalidArgumentError(absl::StrCat("added token ", id, " has no string content"));
  }
  AddedToken token;
  token.id = id;
  token.content = content->get<std::string>();
  token.special = BoolOr(entry, "special", false);
  token.lstrip = BoolOr(entry, "lstrip", false);
  token.rstrip = BoolOr(entry, "rstrip", false);
  token.single_word = BoolOr(entry, "single_word", false);
  token.normalized = BoolOr(entry, "normalized", !token.special);
  return token;
}

// Adds `token` unless its id is already present (the first source wins).
void AddIfNew(AddedToken token, absl::flat_hash_set<int32_t>* ids, std::vector<AddedToken>* out) {
  if (ids->insert(token.id).second) out->push_back(std::move(token));
}

// tokenizer_config.json `added_tokens_decoder`: {"<id>": {content, special, ...}}.
absl::Status ParseAddedTokensDecoder(const json& config, absl::flat_hash_set<int32_t>* ids,
                                     std::vector<AddedToken>* out) {
  const auto decoder = config.find("added_tokens_decoder");
  if (decoder == config.end() || decoder->is_null()) return absl::OkStatus();
  if (!decoder->is_object()) {
    return absl::InvalidArgumentError("\"added_tokens_decoder\" is not an object");
  }
  for (const auto& [key, entry] : decoder->items()) {
    int32_t id = -1;
    if (!absl::SimpleAtoi(key, &id) || id < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("\"added_tokens_decoder\" key \"", key, "\" is not a token id"));
    }
    absl::StatusOr<AddedToken> token = ParseAddedToken(entry, id);
    if (!token.ok()) return token.status();
    AddIfNew(std::move(*token), ids, out);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::pair<std::string, std::string>> SplitMerge(std::string_view line) {
  const std::vector<absl::string_view> parts = absl::StrSplit(AbslView(line), ' ');
  if (parts.size() != 2 || parts[0].empty() || parts[1].empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("merge \"", AbslView(line), "\" is not two tokens separated by one space"));
  }
  return std::make_pair(std::string(parts[0]), std::string(parts[1]));
}

absl::Status CheckDecoder(const json& decoder) {
  if (decoder.is_null()) return absl::OkStatus();
  if (!decoder.is_object() || !decoder.contains("type") || !decoder["type"].is_string()) {
    return absl::InvalidArgumentError("decoder: expected an object with a string \"type\"");
  }
  const std::string type = decoder["type"].get<std::string>();
  if (type == "ByteLevel") return absl::OkStatus();
  if (type == "Sequence" && decoder.contains("decoders") && decoder["decoders"].is_array()) {
    for (const json& child : decoder["decoders"]) {
      if (absl::Status s = CheckDecoder(child); !s.ok()) return s;
    }
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      absl::StrCat("decoder type \"", type, "\" is not supported (ByteLevel or null)"));
}

absl::Status CheckBpeOptions(const json& model) {
  if (model.contains("type") && model["type"] != "BPE") {
    return absl::InvalidArgumentError(
        absl::StrCat("model type ", model["type"].dump(), " is not supported (only BPE)"));
  }
  if (const auto it = model.find("dropout");
      it != model.end() && it->is_number() && it->get<double>() > 0) {
    return absl::InvalidArgumentError("model.dropout > 0 is not supported");
  }
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    if (const auto it = model.find(key);
        it != model.end() && it->is_string() && !it->get<std::string>().empty()) {
      return absl::InvalidArgumentError(absl::StrCat("model.", key, " is not supported"));
    }
  }
  return absl::OkStatus();
}

// Streams the two big tables (vocab object, merges array) out of the JSON while nlohmann
// parses it, so they never become DOM nodes: a 150k-entry std::map-backed json object costs
// more than all the rest of loading together.
class TableCollector {
 public:
  // `vocab_path` / `merges_path`: the keys leading to the tables ({} = the top level);
  // no merges_path when the file has no merges.
  TableCollector(std::vector<std::string> vocab_path,
                 std::optional<std::vector<std::string>> merges_path)
      : vocab_path_(std::move(vocab_path)), merges_path_(std::move(merges_path)) {}

  json Parse(std::string_view text) {
    return json::parse(text.begin(), text.end(),
                       [this](int depth, json::parse_event_t event, json& parsed) {
                         return OnEvent(depth, event, parsed);
                       });
  }

  BpeModel::Vocab vocab;
  std::vector<BpeModel::Merge> merges;
  bool saw_vocab = false;
  bool saw_merges = false;
  std::string error;  // first problem in either table

 private:
  bool AtPath(const std::vector<std::string>& path, int depth) const {
    if (depth != static_cast<int>(path.size())) return false;
    for (size_t i = 0; i < path.size(); ++i) {
      if (keys_.size() <= i + 1 || keys_[i + 1] != path[i]) return false;
    }
    return true;
  }

  void Fail(std::string message) {
    if (error.empty()) error = std::move(message);
  }

  bool OnEvent(int depth, json::parse_event_t event, json& parsed) {
    using E = json::parse_event_t;
    if (event == E::key) {
      if (keys_.size() <= static_cast<size_t>(depth)) keys_.resize(depth + 1);
      keys_[depth] = parsed.get<std::string>();
      if (vocab_depth_ >= 0 && depth == vocab_depth_ + 1) {
        CheckNoPendingVocabKey();
        pending_vocab_key_ = keys_[depth];
        // Discarding a vocab key keeps it out of the DOM object. A scalar value still gets a
        // `value` event; an object or array value of a discarded key gets no event at all,
        // which CheckNoPendingVocabKey() notices.
        return false;
      }
      return true;
    }
    if (event == E::object_start && vocab_depth_ < 0 && AtPath(vocab_path_, depth)) {
      vocab_depth_ = depth;
      saw_vocab = true;
      return true;
    }
    if (event == E::array_start && merges_depth_ < 0 && merges_path_.has_value() &&
        AtPath(*merges_path_, depth)) {
      merges_depth_ = depth;
      saw_merges = true;
      return true;
    }
    const bool is_end = event == E::object_end || event == E::array_end;
    if (is_end && depth == vocab_depth_) {
      CheckNoPendingVocabKey();
      vocab_depth_ = -2;  // done; never reopen
      return true;
    }
    if (is_end && depth == merges_depth_) {
      merges_depth_ = -2;
      return true;
    }
    const bool is_entry = event == E::value || is_end;
    if (is_entry && vocab_depth_ >= 0 && depth == vocab_depth_ + 1) {
      const std::string& token = keys_[depth];
      pending_vocab_key_.reset();
      if (!parsed.is_number_integer() || parsed.get<int64_t>() < 0 ||
          parsed.get<int64_t>() > std::numeric_limits<int32_t>::max()) {
        Fail(absl::StrCat("vocab entry \"", token, "\" has id ", parsed.dump(),
                          " (expected a non-negative 32-bit integer)"));
      } else {
        // Repeated keys: the last one wins, as in a JSON object.
        vocab.insert_or_assign(token, parsed.get<int32_t>());
      }
      return false;
    }
    if (is_entry && merges_depth_ >= 0 && depth == merges_depth_ + 1) {
      AddMerge(parsed);
      return false;
    }
    return true;
  }

  void CheckNoPendingVocabKey() {
    if (pending_vocab_key_.has_value()) {
      Fail(absl::StrCat("vocab entry \"", *pending_vocab_key_,
                        "\" has id that is an object or array (expected an integer)"));
      pending_vocab_key_.reset();
    }
  }

  void AddMerge(const json& entry) {
    const size_t index = merges.size();
    if (entry.is_string()) {
      absl::StatusOr<BpeModel::Merge> merge = SplitMerge(entry.get<std::string>());
      if (!merge.ok()) {
        Fail(absl::StrCat("model.merges[", index, "]: ", merge.status().message()));
        return;
      }
      merges.push_back(std::move(*merge));
    } else if (entry.is_array() && entry.size() == 2 && entry[0].is_string() &&
               entry[1].is_string()) {
      merges.emplace_back(entry[0].get<std::string>(), entry[1].get<std::string>());
    } else {
      Fail(absl::StrCat("model.merges[", index,
                        "] is neither \"a b\" nor [\"a\", \"b\"]: ", entry.dump()));
    }
  }

  std::vector<std::string> vocab_path_;
  std::optional<std::vector<std::string>> merges_path_;
  std::vector<std::string> keys_;  // keys_[d]: the last key seen at depth d
  int vocab_depth_ = -1;           // depth of the vocab container while inside it
  int merges_depth_ = -1;
  std::optional<std::string> pending_vocab_key_;  // vocab key whose value is not seen yet
};

absl::StatusOr<std::unique_ptr<BpeTokenizer>> ParseTokenizerJsonUnchecked(
    const json& root, TableCollector& tables, std::vector<AddedToken> config_tokens) {
  if (!root.is_object()) return absl::InvalidArgumentError("top level is not an object");
  const auto model_it = root.find("model");
  if (model_it == root.end() || !model_it->is_object()) {
    return absl::InvalidArgumentError("missing \"model\" object");
  }
  const json& model = *model_it;
  if (absl::Status s = CheckBpeOptions(model); !s.ok()) return s;
  if (!tables.error.empty()) return absl::InvalidArgumentError(tables.error);
  if (!tables.saw_vocab) return absl::InvalidArgumentError("missing \"model.vocab\" object");
  if (!tables.saw_merges) return absl::InvalidArgumentError("missing \"model.merges\" array");
  std::vector<BpeModel::Merge> merges = std::move(tables.merges);
  BpeModel::Vocab vocab = std::move(tables.vocab);
  const bool ignore_merges = BoolOr(model, "ignore_merges", false);
  absl::StatusOr<std::unique_ptr<BpeModel>> bpe =
      BpeModel::Create(std::move(vocab), merges, ignore_merges);
  if (!bpe.ok()) return bpe.status();

  BpeTokenizerParts parts;
  parts.model = std::move(*bpe);
  const json null_json;
  const auto field = [&](const char* key) -> const json& {
    const auto it = root.find(key);
    return it == root.end() ? null_json : *it;
  };
  absl::StatusOr<TextNormalizer> normalizer = TextNormalizer::FromJson(field("normalizer"));
  if (!normalizer.ok()) return normalizer.status();
  parts.normalizer = std::move(*normalizer);
  absl::StatusOr<PreTokenizer> pre = PreTokenizer::FromJson(field("pre_tokenizer"));
  if (!pre.ok()) return pre.status();
  parts.pre_tokenizer = std::move(*pre);
  if (absl::Status s = CheckDecoder(field("decoder")); !s.ok()) return s;

  absl::flat_hash_set<int32_t> ids;
  const json& added = field("added_tokens");
  if (!added.is_null() && !added.is_array()) {
    return absl::InvalidArgumentError("\"added_tokens\" is not an array");
  }
  if (added.is_array()) {
    for (size_t i = 0; i < added.size(); ++i) {
      const json& entry = added[i];
      if (!entry.is_object() || !entry.contains("id") || !entry["id"].is_number_integer()) {
        return absl::InvalidArgumentError(
            absl::StrCat("added_tokens[", i, "] has no integer \"id\""));
      }
      absl::StatusOr<AddedToken> token = ParseAddedToken(entry, entry["id"].get<int32_t>());
      if (!token.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat("added_tokens[", i, "]: ", token.status().message()));
      }
      AddIfNew(std::move(*token), &ids, &parts.added_tokens);
    }
  }
  // tokenizer_config.json entries fill in ids tokenizer.json lacks, as transformers does.
  for (AddedToken& token : config_tokens) AddIfNew(std::move(token), &ids, &parts.added_tokens);
  return BpeTokenizer::Create(std::move(parts));
}

// Special-token strings named in a tokenizer_config.json / special_tokens_map.json object.
void CollectSpecialStrings(const json& config, absl::flat_hash_set<std::string>* out) {
  if (!config.is_object()) return;
  auto add = [&](const json& value) {
    if (value.is_string()) out->insert(value.get<std::string>());
    if (value.is_object() && value.contains("content") && value["content"].is_string()) {
      out->insert(value["content"].get<std::string>());
    }
  };
  for (const char* key : {"bos_token", "eos_token", "unk_token", "pad_token", "mask_token",
                          "sep_token", "cls_token"}) {
    if (config.contains(key)) add(config[key]);
  }
  if (config.contains("additional_special_tokens") &&
      config["additional_special_tokens"].is_array()) {
    for (const json& value : config["additional_special_tokens"]) add(value);
  }
}

// Reads an optional JSON file: a missing file gives null, a malformed one an error.
absl::StatusOr<json> ReadOptionalJson(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return json();
  absl::StatusOr<std::string> text = ReadFile(path);
  if (!text.ok()) return text.status();
  absl::StatusOr<json> parsed = ParseJson(*text, path);
  if (!parsed.ok()) return parsed.status();
  if (!parsed->is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": top level is not an object"));
  }
  return parsed;
}

absl::StatusOr<std::vector<BpeModel::Merge>> ParseMergesTxt(std::string_view text) {
  std::vector<BpeModel::Merge> merges;
  size_t line_number = 0;
  for (absl::string_view line : absl::StrSplit(AbslView(text), '\n')) {
    ++line_number;
    line = absl::StripAsciiWhitespace(line);
    // As Qwen2Tokenizer: skip a leading "#version" line and blank lines.
    if (line.empty() || (line_number == 1 && absl::StartsWith(line, "#version:"))) continue;
    std::vector<absl::string_view> parts = absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (parts.size() != 2) {
      return absl::InvalidArgumentError(
          absl::StrCat("line ", line_number, ": \"", line, "\" is not two tokens"));
    }
    merges.emplace_back(std::string(parts[0]), std::string(parts[1]));
  }
  return merges;
}

}  // namespace

absl::StatusOr<std::unique_ptr<BpeTokenizer>> ParseTokenizerJson(std::string_view json_text,
                                                                 std::string_view source,
                                                                 std::string_view config_json,
                                                                 std::string_view config_source) {
  TableCollector tables({"model", "vocab"}, std::vector<std::string>{"model", "merges"});
  json root;
  try {
    root = tables.Parse(json_text);
  } catch (const json::exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(AbslView(source), ": malformed JSON: ", e.what()));
  }
  std::vector<AddedToken> config_tokens;
  if (!config_json.empty()) {
    absl::StatusOr<json> config = ParseJson(config_json, config_source);
    if (!config.ok()) return config.status();
    absl::Status status = config->is_object()
                              ? absl::OkStatus()
                              : absl::InvalidArgumentError("top level is not an object");
    try {
      absl::flat_hash_set<int32_t> ids;
      if (status.ok()) status = ParseAddedTokensDecoder(*config, &ids, &config_tokens);
    } catch (const json::exception& e) {
      status = absl::InvalidArgumentError(absl::StrCat("unexpected content: ", e.what()));
    }
    if (!status.ok()) return WithSource(status, config_source);
  }
  try {
    absl::StatusOr<std::unique_ptr<BpeTokenizer>> tokenizer =
        ParseTokenizerJsonUnchecked(root, tables, std::move(config_tokens));
    return tokenizer.ok() ? std::move(tokenizer) : WithSource(tokenizer.status(), source);
  } catch (const json::exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(AbslView(source), ": unexpected content: ", e.what()));
  }
}

absl::StatusOr<std::unique_ptr<BpeTokenizer>> LoadTokenizerJson(const std::string& dir) {
  const std::string path = (std::filesystem::path(dir) / "tokenizer.json").string();
  absl::StatusOr<std::string> text = ReadFile(path);
  if (!text.ok()) return text.status();
  const std::string config_path = (std::filesystem::path(dir) / "tokenizer_config.json").string();
  std::string config_text;
  std::error_code ec;
  if (std::filesystem::exists(config_path, ec)) {
    absl::StatusOr<std::string> config = ReadFile(config_path);
    if (!config.ok()) return config.status();
    config_text = std::move(*config);
  }
  return ParseTokenizerJson(*text, path, config_text, config_path);
}

namespace {

// The files of a "slow" (vocab + merges) tokenizer folder.
struct SlowTokenizerPaths {
  explicit SlowTokenizerPaths(const std::filesystem::path& root)
      : vocab((root / "vocab.json").string()),
        merges((root / "merges.txt").string()),
        config((root / "tokenizer_config.json").string()),
        added((root / "added_tokens.json").string()),
        special_map((root / "special_tokens_map.json").string()) {}
  std::string vocab, merges, config, added, special_map;
};

// vocab.json and merges.txt (their texts) as one BPE model.
absl::StatusOr<std::unique_ptr<BpeModel>> ParseBpeModel(const SlowTokenizerPaths& paths,
                                                        const std::string& vocab_text,
                                                        const std::string& merges_text) {
  // vocab.json is one big object: stream it (no merges in this file).
  TableCollector tables({}, std::nullopt);
  try {
    tables.Parse(vocab_text);
  } catch (const json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(paths.vocab, ": malformed JSON: ", e.what()));
  }
  if (!tables.saw_vocab) {
    return absl::InvalidArgumentError(absl::StrCat(paths.vocab, ": top level is not an object"));
  }
  if (!tables.error.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(paths.vocab, ": ", tables.error));
  }
  absl::StatusOr<std::vector<BpeModel::Merge>> merges = ParseMergesTxt(merges_text);
  if (!merges.ok()) return WithSource(merges.status(), paths.merges);
  absl::StatusOr<std::unique_ptr<BpeModel>> bpe =
      BpeModel::Create(std::move(tables.vocab), *merges, /*ignore_merges=*/false);
  if (!bpe.ok()) return WithSource(bpe.status(), absl::StrCat(paths.vocab, " + ", paths.merges));
  return bpe;
}

// The added tokens of tokenizer_config.json's added_tokens_decoder and of added_tokens.json
// (special when either config file lists them as special), and the tokenizer class.
absl::Status ReadAddedTokens(const SlowTokenizerPaths& paths, const json& config,
                             const json& added_json, const json& special_map,
                             BpeTokenizerParts* parts, std::string* tokenizer_class) {
  try {
    if (config.is_object() && config.contains("tokenizer_class") &&
        config["tokenizer_class"].is_string()) {
      *tokenizer_class = config["tokenizer_class"].get<std::string>();
    }
    absl::flat_hash_set<int32_t> ids;
    if (config.is_object()) {
      if (absl::Status s = ParseAddedTokensDecoder(config, &ids, &parts->added_tokens); !s.ok()) {
        return WithSource(s, paths.config);
      }
    }
    if (added_json.is_object()) {
      absl::flat_hash_set<std::string> specials;
      CollectSpecialStrings(config, &specials);
      CollectSpecialStrings(special_map, &specials);
      for (const auto& [content, id] : added_json.items()) {
        if (!id.is_number_integer() || id.get<int64_t>() < 0) {
          return absl::InvalidArgumentError(
              absl::StrCat(paths.added, ": token \"", content, "\" has no valid id"));
        }
        AddedToken token;
        token.id = id.get<int32_t>();
        token.content = content;
        token.special = specials.contains(content);
        AddIfNew(std::move(token), &ids, &parts->added_tokens);
      }
    }
  } catch (const json::exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(paths.config, " / ", paths.added, ": unexpected content: ", e.what()));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<BpeTokenizer>> LoadVocabAndMerges(const std::string& dir) {
  const SlowTokenizerPaths paths{std::filesystem::path(dir)};
  // Every file is read before any is interpreted.
  absl::StatusOr<std::string> vocab_text = ReadFile(paths.vocab);
  if (!vocab_text.ok()) return vocab_text.status();
  absl::StatusOr<std::string> merges_text = ReadFile(paths.merges);
  if (!merges_text.ok()) return merges_text.status();
  absl::StatusOr<json> config = ReadOptionalJson(paths.config);
  if (!config.ok()) return config.status();
  absl::StatusOr<json> added_json = ReadOptionalJson(paths.added);
  if (!added_json.ok()) return added_json.status();
  absl::StatusOr<json> special_map = ReadOptionalJson(paths.special_map);
  if (!special_map.ok()) return special_map.status();

  absl::StatusOr<std::unique_ptr<BpeModel>> bpe = ParseBpeModel(paths, *vocab_text, *merges_text);
  if (!bpe.ok()) return bpe.status();
  BpeTokenizerParts parts;
  parts.model = std::move(*bpe);
  std::string tokenizer_class;
  if (absl::Status st =
          ReadAddedTokens(paths, *config, *added_json, *special_map, &parts, &tokenizer_class);
      !st.ok()) {
    return st;
  }
  // The slow tokenizer matches every added token on the raw text (before NFC).
  for (AddedToken& token : parts.added_tokens) token.normalized = false;

  const bool gpt2 = tokenizer_class == "GPT2Tokenizer";
  absl::StatusOr<PreTokenizer> pre =
      PreTokenizer::RegexThenByteLevel(gpt2 ? kGpt2SplitPattern : kQwen2SplitPattern);
  if (!pre.ok()) return pre.status();
  parts.pre_tokenizer = std::move(*pre);
  if (!gpt2) parts.normalizer = TextNormalizer({UnicodeForm::kNfc});
  absl::StatusOr<std::unique_ptr<BpeTokenizer>> tokenizer = BpeTokenizer::Create(std::move(parts));
  if (!tokenizer.ok()) return WithSource(tokenizer.status(), dir);
  return tokenizer;
}

}  // namespace dllm
