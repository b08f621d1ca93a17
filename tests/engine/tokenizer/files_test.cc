#include "engine/tokenizer/files.h"

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "engine/tokenizer/byte_level.h"

namespace dllm {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

// A fresh, empty folder under the system temp dir, removed when the test ends.
class TempDir {
 public:
  explicit TempDir(const std::string& name) {
    path_ = fs::temp_directory_path() / ("dllm_tok_" + name + "_" + std::to_string(::getpid()));
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  std::string path() const { return path_.string(); }
  void Write(const std::string& file, const std::string& text) const {
    std::ofstream(path_ / file, std::ios::binary) << text;
  }

 private:
  fs::path path_;
};

// Byte-level vocabulary of all 256 single bytes (id = byte) plus "Ġt" and "he".
json ByteVocab() {
  const ByteLevelMap map;
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) {
    std::string s;
    map.Encode(std::string(1, static_cast<char>(b)), &s);
    vocab[s] = b;
  }
  vocab["\xC4\xA0t"] = 256;
  vocab["he"] = 257;
  return vocab;
}

json MinimalTokenizerJson() {
  return json{
      {"model", {{"type", "BPE"}, {"vocab", ByteVocab()}, {"merges", {"\xC4\xA0 t", "h e"}}}},
      {"normalizer", nullptr},
      {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}},
      {"decoder", {{"type", "ByteLevel"}}},
      {"added_tokens", json::array({{{"id", 258}, {"content", "<|end|>"}, {"special", true}}})}};
}

std::string ErrorOf(const absl::StatusOr<std::unique_ptr<BpeTokenizer>>& result) {
  REQUIRE_FALSE(result.ok());
  return std::string(result.status().message());
}

TEST_CASE("tokenizer.json loads merges in string and array form", "[tokenizer]") {
  json config = MinimalTokenizerJson();
  auto strings = ParseTokenizerJson(config.dump(), "t.json");
  REQUIRE(strings.ok());
  config["model"]["merges"] =
      json::array({json::array({"\xC4\xA0", "t"}), json::array({"h", "e"})});
  auto arrays = ParseTokenizerJson(config.dump(), "t.json");
  REQUIRE(arrays.ok());
  const std::vector<int32_t> expected = {256, 257, 258};
  CHECK((*strings)->Encode(" the<|end|>") == expected);
  CHECK((*arrays)->Encode(" the<|end|>") == expected);
  CHECK((*strings)->size() == 259);
  CHECK((*strings)->IsSpecial(258));
  CHECK_FALSE((*strings)->IsSpecial(256));
}

TEST_CASE("tokenizer_config.json adds tokens missing from tokenizer.json", "[tokenizer]") {
  const std::string config =
      R"({"added_tokens_decoder": {"258": {"content": "<|end|>", "special": true},
                                   "259": {"content": "<extra>", "special": false}}})";
  auto tok = ParseTokenizerJson(MinimalTokenizerJson().dump(), "t.json", config, "cfg.json");
  REQUIRE(tok.ok());
  CHECK((*tok)->size() == 260);
  CHECK((*tok)->Encode("<extra><|end|>") == std::vector<int32_t>{259, 258});
  CHECK_FALSE((*tok)->IsSpecial(259));
}

TEST_CASE("tokenizer.json problems give errors naming file and problem", "[tokenizer]") {
  CHECK_THAT(ErrorOf(ParseTokenizerJson("{\"model\": ", "bad.json")),
             Catch::Contains("bad.json") && Catch::Contains("malformed JSON"));
  CHECK_THAT(ErrorOf(ParseTokenizerJson("{}", "t.json")),
             Catch::Contains("t.json") && Catch::Contains("model"));

  json unknown_merge = MinimalTokenizerJson();
  unknown_merge["model"]["merges"].push_back("q zzz");
  CHECK_THAT(ErrorOf(ParseTokenizerJson(unknown_merge.dump(), "t.json")),
             Catch::Contains("t.json") && Catch::Contains("merge #2") && Catch::Contains("zzz"));

  json bad_merge = MinimalTokenizerJson();
  bad_merge["model"]["merges"].push_back("abc");
  CHECK_THAT(ErrorOf(ParseTokenizerJson(bad_merge.dump(), "t.json")),
             Catch::Contains("model.merges[2]"));

  json bad_regex = MinimalTokenizerJson();
  bad_regex["pre_tokenizer"] = {
      {"type", "Sequence"},
      {"pretokenizers",
       json::array(
           {{{"type", "Split"}, {"pattern", {{"Regex", "(?<bad"}}}, {"behavior", "Isolated"}},
            {{"type", "ByteLevel"}}})}};
  CHECK_THAT(ErrorOf(ParseTokenizerJson(bad_regex.dump(), "t.json")),
             Catch::Contains("t.json") && Catch::Contains("bad regex"));

  json bad_normalizer = MinimalTokenizerJson();
  bad_normalizer["normalizer"] = {{"type", "Lowercase"}};
  CHECK_THAT(ErrorOf(ParseTokenizerJson(bad_normalizer.dump(), "t.json")),
             Catch::Contains("Lowercase"));

  json wrong_type = MinimalTokenizerJson();
  wrong_type["model"]["vocab"]["x"] = "seven";
  CHECK_THAT(ErrorOf(ParseTokenizerJson(wrong_type.dump(), "t.json")),
             Catch::Contains("\"x\" has id \"seven\""));

  json huge_id = MinimalTokenizerJson();
  huge_id["model"]["vocab"]["x"] = 4294967296LL;
  CHECK_THAT(ErrorOf(ParseTokenizerJson(huge_id.dump(), "t.json")), Catch::Contains("4294967296"));

  json no_merges = MinimalTokenizerJson();
  no_merges["model"].erase("merges");
  CHECK_THAT(ErrorOf(ParseTokenizerJson(no_merges.dump(), "t.json")),
             Catch::Contains("model.merges"));

  json nested_vocab = MinimalTokenizerJson();
  nested_vocab["model"]["vocab"]["x"] = {{"id", 3}};
  CHECK_THAT(ErrorOf(ParseTokenizerJson(nested_vocab.dump(), "t.json")),
             Catch::Contains("\"x\" has id"));

  json wordpiece = MinimalTokenizerJson();
  wordpiece["model"]["type"] = "WordPiece";
  CHECK_THAT(ErrorOf(ParseTokenizerJson(wordpiece.dump(), "t.json")), Catch::Contains("WordPiece"));

  json bad_added = MinimalTokenizerJson();
  bad_added["added_tokens"] = json::array({{{"content", "<x>"}}});
  CHECK_THAT(ErrorOf(ParseTokenizerJson(bad_added.dump(), "t.json")),
             Catch::Contains("added_tokens[0]"));

  json bad_decoder = MinimalTokenizerJson();
  bad_decoder["decoder"] = {{"type", "WordPiece"}};
  CHECK_THAT(ErrorOf(ParseTokenizerJson(bad_decoder.dump(), "t.json")), Catch::Contains("decoder"));

  CHECK_THAT(
      ErrorOf(ParseTokenizerJson(MinimalTokenizerJson().dump(), "t.json", "[1,", "cfg.json")),
      Catch::Contains("cfg.json"));
  CHECK_THAT(ErrorOf(ParseTokenizerJson(MinimalTokenizerJson().dump(), "t.json",
                                        R"({"added_tokens_decoder": {"x": {"content": "<a>"}}})",
                                        "cfg.json")),
             Catch::Contains("cfg.json") && Catch::Contains("\"x\""));
}

TEST_CASE("Tokenizer::LoadFromDir reports missing files", "[tokenizer]") {
  auto missing = Tokenizer::LoadFromDir("/nonexistent/dllm/tokenizer");
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.status().code() == absl::StatusCode::kNotFound);

  TempDir empty("empty");
  auto none = Tokenizer::LoadFromDir(empty.path());
  REQUIRE_FALSE(none.ok());
  CHECK_THAT(std::string(none.status().message()), Catch::Contains("tokenizer.json"));

  TempDir no_merges("nomerges");
  no_merges.Write("vocab.json", ByteVocab().dump());
  auto result = Tokenizer::LoadFromDir(no_merges.path());
  REQUIRE_FALSE(result.ok());
  CHECK_THAT(std::string(result.status().message()), Catch::Contains("merges.txt"));
}

TEST_CASE("vocab.json + merges.txt loads with added tokens from both config files", "[tokenizer]") {
  TempDir dir("slow");
  dir.Write("vocab.json", ByteVocab().dump());
  dir.Write("merges.txt", "#version: 0.2\n\xC4\xA0 t\nh e\n");
  dir.Write("tokenizer_config.json", json{{"added_tokens_decoder",
                                           {{"258", {{"content", "<|end|>"}, {"special", true}}},
                                            {"259", {{"content", "<tool>"}, {"special", false}}}}},
                                          {"eos_token", "<|end|>"}}
                                         .dump());
  dir.Write("added_tokens.json", json{{"<|end|>", 258}, {"<|mask|>", 260}}.dump());
  dir.Write("special_tokens_map.json", json{{"mask_token", "<|mask|>"}}.dump());
  auto tokenizer = Tokenizer::LoadFromDir(dir.path());
  REQUIRE(tokenizer.ok());
  const auto& tok = **tokenizer;
  CHECK(tok.size() == 261);
  CHECK(tok.Encode(" the<tool><|mask|>") == std::vector<int32_t>{256, 257, 259, 260});
  CHECK(tok.IsSpecial(258));
  CHECK(tok.IsSpecial(260));
  CHECK_FALSE(tok.IsSpecial(259));
  CHECK(tok.TokenToId("<|mask|>") == 260);
  CHECK(tok.TokenToId("he") == 257);
  CHECK_FALSE(tok.TokenToId("nope").has_value());
  const std::vector<int32_t> ids = {256, 258, 259, 260};
  CHECK(tok.Decode(ids, /*skip_special=*/true) == " t<tool>");
  CHECK(tok.Decode(ids, /*skip_special=*/false) == " t<|end|><tool><|mask|>");
  CHECK(tok.TokenBytes(256) == " t");
  CHECK(tok.TokenBytes(99999).empty());
}

TEST_CASE("vocab.json + merges.txt problems name the file", "[tokenizer]") {
  TempDir dir("slowbad");
  dir.Write("vocab.json", ByteVocab().dump());
  dir.Write("merges.txt", "#version: 0.2\nh e\nthree part line\n");
  auto bad_line = Tokenizer::LoadFromDir(dir.path());
  REQUIRE_FALSE(bad_line.ok());
  CHECK_THAT(std::string(bad_line.status().message()),
             Catch::Contains("merges.txt") && Catch::Contains("line 3"));

  dir.Write("merges.txt", "#version: 0.2\nh e\nhe zz\n");
  auto unknown = Tokenizer::LoadFromDir(dir.path());
  REQUIRE_FALSE(unknown.ok());
  CHECK_THAT(std::string(unknown.status().message()),
             Catch::Contains("merges.txt") && Catch::Contains("zz"));

  dir.Write("merges.txt", "h e\n");
  dir.Write("vocab.json", "{\"a\": 0,");
  auto malformed = Tokenizer::LoadFromDir(dir.path());
  REQUIRE_FALSE(malformed.ok());
  CHECK_THAT(std::string(malformed.status().message()),
             Catch::Contains("vocab.json") && Catch::Contains("malformed JSON"));

  dir.Write("vocab.json", ByteVocab().dump());
  dir.Write("added_tokens.json", "{\"<x>\": \"one\"}");
  auto bad_added = Tokenizer::LoadFromDir(dir.path());
  REQUIRE_FALSE(bad_added.ok());
  CHECK_THAT(std::string(bad_added.status().message()), Catch::Contains("added_tokens.json"));
}

}  // namespace
}  // namespace dllm
