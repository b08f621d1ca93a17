#include "engine/tokenizer/added_tokens.h"

#include <catch2/catch.hpp>

namespace dllm {
namespace {

using Pieces = std::vector<std::pair<std::string, int32_t>>;

Pieces SplitAll(const AddedTokenSet& set, const std::string& text) {
  Pieces out;
  for (const auto& s : set.Split(text)) out.emplace_back(std::string(s.text), s.id);
  return out;
}

AddedToken Token(int32_t id, std::string content) {
  AddedToken t;
  t.id = id;
  t.content = std::move(content);
  t.special = true;
  return t;
}

TEST_CASE("Added tokens split leftmost-longest", "[tokenizer]") {
  auto set = AddedTokenSet::Create({Token(10, "<|a|>"), Token(11, "<|a|>b"), Token(12, "<|b|>")});
  REQUIRE(set.ok());
  CHECK(SplitAll(*set, "x<|a|>by<|b|><|a|>") ==
        Pieces{{"x", -1}, {"<|a|>b", 11}, {"y", -1}, {"<|b|>", 12}, {"<|a|>", 10}});
  CHECK(SplitAll(*set, "<|a") == Pieces{{"<|a", -1}});
  CHECK(SplitAll(*set, "") == Pieces{});
}

TEST_CASE("Added token lstrip rstrip and single_word flags", "[tokenizer]") {
  AddedToken strip = Token(5, "<m>");
  strip.lstrip = true;
  strip.rstrip = true;
  AddedToken word = Token(6, "cat");
  word.single_word = true;
  auto set = AddedTokenSet::Create({strip, word});
  REQUIRE(set.ok());
  CHECK(SplitAll(*set, "a  <m>\t b") == Pieces{{"a", -1}, {"  <m>\t ", 5}, {"b", -1}});
  CHECK(SplitAll(*set, "a cat b") == Pieces{{"a ", -1}, {"cat", 6}, {" b", -1}});
  CHECK(SplitAll(*set, "concatenate") == Pieces{{"concatenate", -1}});
}

TEST_CASE("Added token conflicts are errors", "[tokenizer]") {
  auto clash = AddedTokenSet::Create({Token(1, "<x>"), Token(2, "<x>")});
  REQUIRE_FALSE(clash.ok());
  CHECK_THAT(std::string(clash.status().message()), Catch::Contains("<x>"));
  auto empty = AddedTokenSet::Create({Token(1, "")});
  CHECK_FALSE(empty.ok());
}

}  // namespace
}  // namespace dllm
