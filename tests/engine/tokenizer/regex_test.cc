#include "engine/tokenizer/regex.h"

#include <catch2/catch.hpp>

#include "engine/tokenizer/files.h"
#include "engine/tokenizer/pretokenizer.h"

namespace dllm {
namespace {

std::vector<std::string> Matches(const UnicodeRegex& regex, const std::string& text) {
  std::vector<std::pair<size_t, size_t>> spans;
  REQUIRE(regex.FindAll(text, &spans).ok());
  std::vector<std::string> out;
  for (const auto& [start, end] : spans) out.push_back(text.substr(start, end - start));
  return out;
}

TEST_CASE("Qwen2 split regex pieces", "[tokenizer]") {
  auto regex = UnicodeRegex::Compile(kQwen2SplitPattern);
  REQUIRE(regex.ok());
  using V = std::vector<std::string>;
  CHECK(Matches(**regex, "Hello world") == V{"Hello", " world"});
  // Contractions are case-insensitive; digits split one at a time.
  CHECK(Matches(**regex, "I'LL DON'T 2024") ==
        V{"I", "'LL", " DON", "'T", " ", "2", "0", "2", "4"});
  // \s+(?!\S) leaves the last space to the next word.
  CHECK(Matches(**regex, "a   b") == V{"a", "  ", " b"});
  CHECK(Matches(**regex, "x\r\n\r\ny") == V{"x", "\r\n\r\n", "y"});
  CHECK(Matches(**regex, "\xE4\xBD\xA0\xE5\xA5\xBD!!") == V{"\xE4\xBD\xA0\xE5\xA5\xBD", "!!"});
}

TEST_CASE("Regex supports possessive quantifiers and lookahead", "[tokenizer]") {
  auto possessive = UnicodeRegex::Compile("a++a|b");
  REQUIRE(possessive.ok());
  // A possessive a++ never gives back an 'a', so only the 'b' matches.
  CHECK(Matches(**possessive, "aaab") == std::vector<std::string>{"b"});
  auto llada = UnicodeRegex::Compile(
      R"('(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]++[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+)");
  REQUIRE(llada.ok());
  CHECK(Matches(**llada, "It's 42!") == std::vector<std::string>{"It", "'s", " ", "4", "2", "!"});
}

TEST_CASE("Regex whitespace escape is exactly Unicode White_Space as in Oniguruma", "[tokenizer]") {
  auto regex = UnicodeRegex::Compile(R"(\s+|\S+)");
  REQUIRE(regex.ok());
  // NEL (U+0085) is White_Space; U+180E has not been since Unicode 6.3 (PCRE2 says it is).
  CHECK(Matches(**regex, "a\xC2\x85 b") == std::vector<std::string>{"a", "\xC2\x85 ", "b"});
  CHECK(Matches(**regex, "a\xE1\xA0\x8E b") == std::vector<std::string>{"a\xE1\xA0\x8E", " ", "b"});
  auto in_class = UnicodeRegex::Compile(R"([^\s\p{L}]+)");
  REQUIRE(in_class.ok());
  CHECK(Matches(**in_class, "!\xE1\xA0\x8E? x") == std::vector<std::string>{"!\xE1\xA0\x8E?"});
  const std::string expanded = ExpandWhitespaceEscapes(R"([^\s]\S\\s\Q\s\E)");
  CHECK_THAT(expanded, Catch::StartsWith(R"([^\t\n)"));
  CHECK_THAT(expanded, Catch::EndsWith(R"(\x{3000}]\\s\Q\s\E)"));
  CHECK_THAT(expanded, Catch::Contains(R"(][^\t\n)"));
}

TEST_CASE("Bad regex gives a clear error", "[tokenizer]") {
  auto regex = UnicodeRegex::Compile("(unclosed");
  REQUIRE_FALSE(regex.ok());
  CHECK(regex.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(regex.status().message()), Catch::Contains("(unclosed"));
}

TEST_CASE("Regex handles empty matches without looping", "[tokenizer]") {
  auto regex = UnicodeRegex::Compile("x*");
  REQUIRE(regex.ok());
  std::vector<std::pair<size_t, size_t>> spans;
  REQUIRE((*regex)->FindAll("axxb", &spans).ok());
  std::vector<std::pair<size_t, size_t>> non_empty;
  for (const auto& s : spans) {
    if (s.second > s.first) non_empty.push_back(s);
  }
  CHECK(non_empty == std::vector<std::pair<size_t, size_t>>{{1, 3}});
}

}  // namespace
}  // namespace dllm
