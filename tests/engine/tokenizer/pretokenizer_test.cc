#include "engine/tokenizer/pretokenizer.h"

#include <catch2/catch.hpp>

namespace dllm {
namespace {

using V = std::vector<std::string>;
using nlohmann::json;

// Split on a literal "-" followed by a plain ByteLevel step (identity on ASCII letters).
V SplitWith(const std::string& behavior, const std::string& text, bool invert = false) {
  const json config = {
      {"type", "Sequence"},
      {"pretokenizers",
       json::array({{{"type", "Split"},
                     {"pattern", {{"String", "-"}}},
                     {"behavior", behavior},
                     {"invert", invert}},
                    {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}})}};
  auto pre = PreTokenizer::FromJson(config);
  REQUIRE(pre.ok());
  return pre->Split(text);
}

// Expected splits are the examples of HF tokenizers' SplitDelimiterBehavior documentation.
TEST_CASE("Split behaviors match HF tokenizers", "[tokenizer]") {
  const std::string text = "the-final--countdown";
  CHECK(SplitWith("Removed", text) == V{"the", "final", "countdown"});
  CHECK(SplitWith("Isolated", text) == V{"the", "-", "final", "-", "-", "countdown"});
  CHECK(SplitWith("MergedWithPrevious", text) == V{"the-", "final-", "-", "countdown"});
  CHECK(SplitWith("MergedWithNext", text) == V{"the", "-final", "-", "-countdown"});
  CHECK(SplitWith("Contiguous", text) == V{"the", "-", "final", "--", "countdown"});
  CHECK(SplitWith("Removed", text, /*invert=*/true) == V{"-", "-", "-"});
}

TEST_CASE("ByteLevel pre-tokenizer with GPT-2 regex and prefix space", "[tokenizer]") {
  auto pre = PreTokenizer::FromJson(
      json{{"type", "ByteLevel"}, {"add_prefix_space", true}, {"use_regex", true}});
  REQUIRE(pre.ok());
  // GPT-2: "Hello world" → ["ĠHello", "Ġworld"].
  CHECK(pre->Split("Hello world") == V{"\xC4\xA0Hello", "\xC4\xA0world"});
  CHECK(pre->Split("") == V{});
}

TEST_CASE("Slow-format pre-tokenizer maps bytes after the regex split", "[tokenizer]") {
  auto pre = PreTokenizer::RegexThenByteLevel(R"(\s+|\S+)");
  REQUIRE(pre.ok());
  CHECK(pre->Split("a \n\xC3\xA9") == V{"a", "\xC4\xA0\xC4\x8A", "\xC3\x83\xC2\xA9"});
}

TEST_CASE("Pre-tokenizer config errors are clear", "[tokenizer]") {
  auto message = [](const json& config) {
    auto pre = PreTokenizer::FromJson(config);
    REQUIRE_FALSE(pre.ok());
    return std::string(pre.status().message());
  };
  CHECK_THAT(message(json{{"type", "Whitespace"}}), Catch::Contains("Whitespace"));
  CHECK_THAT(message(json{{"type", "Split"}, {"behavior", "Isolated"}}),
             Catch::Contains("pattern"));
  CHECK_THAT(
      message(json{{"type", "Split"}, {"pattern", {{"Regex", "[a-"}}}, {"behavior", "Isolated"}}),
      Catch::Contains("bad regex"));
  CHECK_THAT(
      message(json{{"type", "Split"}, {"pattern", {{"String", "x"}}}, {"behavior", "Sideways"}}),
      Catch::Contains("Sideways"));
  CHECK_THAT(
      message(json{{"type", "Split"}, {"pattern", {{"String", "x"}}}, {"behavior", "Isolated"}}),
      Catch::Contains("ByteLevel"));
  CHECK_THAT(message(json(nullptr)), Catch::Contains("null"));
}

}  // namespace
}  // namespace dllm
