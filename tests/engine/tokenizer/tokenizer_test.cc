#include "engine/tokenizer/tokenizer.h"

#include <catch2/catch.hpp>
#include <random>
#include <thread>

#include "engine/tokenizer/byte_level.h"
#include "engine/tokenizer/files.h"
#include "engine/tokenizer/utf8.h"

namespace dllm {
namespace {

using nlohmann::json;

// A byte-level tokenizer with the Qwen2 pre-tokenizer, NFC, and a handful of merges.
std::unique_ptr<BpeTokenizer> SmallTokenizer() {
  const ByteLevelMap map;
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) {
    std::string s;
    map.Encode(std::string(1, static_cast<char>(b)), &s);
    vocab[s] = b;
  }
  const std::vector<std::pair<std::string, std::string>> merges = {
      {"\xC4\xA0", "t"}, {"h", "e"}, {"\xC4\xA0t", "he"}, {"\xC3\x83", "\xC2\xA9"}};
  json merge_list = json::array();
  int next_id = 256;
  for (const auto& [a, b] : merges) {
    merge_list.push_back(a + " " + b);
    vocab[a + b] = next_id++;
  }
  const json config = {
      {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", merge_list}}},
      {"normalizer", {{"type", "NFC"}}},
      {"pre_tokenizer",
       {{"type", "Sequence"},
        {"pretokenizers",
         json::array(
             {{{"type", "Split"},
               {"pattern", {{"Regex", std::string(kQwen2SplitPattern)}}},
               {"behavior", "Isolated"}},
              {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}})}}},
      {"decoder", {{"type", "ByteLevel"}}},
      {"added_tokens", json::array({{{"id", 300}, {"content", "<|im_end|>"}, {"special", true}},
                                    {{"id", 301}, {"content", "<tool>"}, {"special", false}}})}};
  auto tokenizer = ParseTokenizerJson(config.dump(), "small.json");
  REQUIRE(tokenizer.ok());
  return std::move(*tokenizer);
}

// Random valid UTF-8 mixing ASCII, whitespace, Latin-1, CJK, emoji and added tokens.
std::string RandomText(std::mt19937& rng) {
  static const std::vector<std::string> kAtoms = {"a",
                                                  "Z",
                                                  " ",
                                                  "  ",
                                                  "\n",
                                                  "\r\n",
                                                  "\t",
                                                  "7",
                                                  "'s",
                                                  "'LL",
                                                  "!",
                                                  "\xC3\xA9",
                                                  "e\xCC\x81",
                                                  "\xE4\xB8\xAD",
                                                  "\xF0\x9F\x98\x80",
                                                  "<|im_end|>",
                                                  "<tool>",
                                                  "<|im_",
                                                  ".",
                                                  "the"};
  std::uniform_int_distribution<size_t> pick(0, kAtoms.size() - 1);
  std::uniform_int_distribution<int> length(0, 24);
  std::string text;
  for (int i = length(rng); i > 0; --i) text += kAtoms[pick(rng)];
  return text;
}

TEST_CASE("Decode inverts Encode for valid UTF-8 up to NFC", "[tokenizer]") {
  const auto tok = SmallTokenizer();
  std::mt19937 rng(1234);
  for (int i = 0; i < 500; ++i) {
    const std::string text = RandomText(rng);
    const std::vector<int32_t> ids = tok->Encode(text);
    // NFC composes "e + U+0301" into "é"; compare against the composed form.
    const std::string composed = TextNormalizer({UnicodeForm::kNfc}).Normalize(text);
    INFO("text: " << text);
    REQUIRE(tok->Decode(ids, /*skip_special=*/false) == composed);
  }
}

TEST_CASE("Encode uses merges and added tokens and NFC", "[tokenizer]") {
  const auto tok = SmallTokenizer();
  using V = std::vector<int32_t>;
  CHECK(tok->Encode(" the") == V{258});
  CHECK(tok->Encode("caf\xC3\xA9") == tok->Encode("cafe\xCC\x81"));
  CHECK(tok->Encode("x<|im_end|>y") == V{'x', 300, 'y'});
  CHECK(tok->Encode("") == V{});
}

TEST_CASE("Invalid UTF-8 input is repaired and never crashes", "[tokenizer]") {
  const auto tok = SmallTokenizer();
  const std::vector<int32_t> ids = tok->Encode("a\xFF\xE4\xB8");
  CHECK(tok->Decode(ids, false) == "a\xEF\xBF\xBD\xEF\xBF\xBD");
}

TEST_CASE("Encode keeps NUL bytes and control characters", "[tokenizer]") {
  const auto tok = SmallTokenizer();
  const std::string text("a\0caf\xC3\xA9\x01\x7F\0", 10);
  CHECK(tok->Decode(tok->Encode(text), false) == text);
}

TEST_CASE("Decode replaces invalid byte sequences with U+FFFD", "[tokenizer]") {
  const auto tok = SmallTokenizer();
  // Byte 0xE4 alone (id 0xE4 is the single byte), then 'a'.
  const std::vector<int32_t> ids = {0xE4, 'a', 999999, -5};
  CHECK(tok->Decode(ids, false) ==
        "\xEF\xBF\xBD"
        "a");
  CHECK(tok->TokenBytes(0xE4) == "\xE4");
}

TEST_CASE("Encode is consistent across threads", "[tokenizer]") {
  const auto tok = SmallTokenizer();
  std::mt19937 rng(7);
  std::vector<std::string> texts;
  for (int i = 0; i < 200; ++i) texts.push_back(RandomText(rng));
  std::vector<std::vector<int32_t>> expected;
  for (const auto& t : texts) expected.push_back(tok->Encode(t));
  std::vector<int> mismatches(4, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (size_t i = 0; i < texts.size(); ++i) {
        const size_t j = (i * 7 + static_cast<size_t>(t)) % texts.size();
        if (tok->Encode(texts[j]) != expected[j]) ++mismatches[t];
      }
    });
  }
  for (auto& thread : threads) thread.join();
  CHECK(mismatches == std::vector<int>(4, 0));
}

}  // namespace
}  // namespace dllm
