#include "engine/tokenizer/utf8.h"

#include <catch2/catch.hpp>

namespace dllm {
namespace {

const std::string kFffd = "\xEF\xBF\xBD";

TEST_CASE("ToValidUtf8 keeps valid text unchanged", "[tokenizer]") {
  const std::string text = "plain ascii, caf\xC3\xA9, \xE4\xB8\xAD\xE6\x96\x87, \xF0\x9F\x98\x80";
  CHECK(IsValidUtf8(text));
  CHECK(ToValidUtf8(text) == text);
}

// Expected values follow the Unicode "maximal subpart" practice (Unicode 15, section 3.9,
// table 3-8), which Python's errors="replace" and TextDecoder implement.
TEST_CASE("ToValidUtf8 replaces each maximal invalid subpart", "[tokenizer]") {
  CHECK(ToValidUtf8("a\xFF"
                    "b") == "a" + kFffd + "b");
  CHECK(ToValidUtf8("\xE4\xB8") == kFffd);  // truncated 3-byte sequence
  CHECK(ToValidUtf8("\xE4\xB8"
                    "x") == kFffd + "x");
  CHECK(ToValidUtf8("\xED\xA0\x80") == kFffd + kFffd + kFffd);              // surrogate
  CHECK(ToValidUtf8("\xC0\xAF") == kFffd + kFffd);                          // overlong
  CHECK(ToValidUtf8("\xF4\x90\x80\x80") == kFffd + kFffd + kFffd + kFffd);  // > U+10FFFF
  CHECK(ToValidUtf8("\xF0\x9F\x98") == kFffd);                              // truncated emoji
  CHECK(ToValidUtf8("\x80\x80") == kFffd + kFffd);                          // stray continuations
  CHECK_FALSE(IsValidUtf8("\xC3"));
}

TEST_CASE("AppendUtf8 and DecodeUtf8At round-trip code points", "[tokenizer]") {
  for (const char32_t cp : {0x24u, 0xA2u, 0x20ACu, 0x10348u, 0x10FFFFu}) {
    std::string s;
    AppendUtf8(cp, &s);
    const size_t len = ValidUtf8SequenceLength(s, 0);
    REQUIRE(len == s.size());
    CHECK(DecodeUtf8At(s, 0, len) == cp);
  }
}

}  // namespace
}  // namespace dllm
