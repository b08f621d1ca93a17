#include "engine/tokenizer/byte_level.h"

#include <catch2/catch.hpp>
#include <set>

namespace dllm {
namespace {

TEST_CASE("ByteLevelMap matches GPT-2 bytes_to_unicode", "[tokenizer]") {
  const ByteLevelMap map;
  std::set<char32_t> seen;
  for (int b = 0; b < 256; ++b) seen.insert(map.CodePointFor(static_cast<uint8_t>(b)));
  CHECK(seen.size() == 256);
  // Well-known points of GPT-2's table: printable bytes map to themselves, byte 0 is U+0100,
  // space is 'Ġ' (U+0120), newline 'Ċ' (U+010A), 0x7F is U+0121, 0xAD is U+0143.
  CHECK(map.CodePointFor('A') == U'A');
  CHECK(map.CodePointFor(0xE9) == 0xE9);
  CHECK(map.CodePointFor(0) == 0x100);
  CHECK(map.CodePointFor(' ') == 0x120);
  CHECK(map.CodePointFor('\n') == 0x10A);
  CHECK(map.CodePointFor(0x7F) == 0x121);
  CHECK(map.CodePointFor(0xAD) == 0x143);
}

TEST_CASE("ByteLevelMap round-trips every byte", "[tokenizer]") {
  const ByteLevelMap map;
  std::string all;
  for (int b = 0; b < 256; ++b) all.push_back(static_cast<char>(b));
  std::string mapped;
  map.Encode(all, &mapped);
  std::string back;
  REQUIRE(map.Decode(mapped, &back));
  CHECK(back == all);

  std::string hello;
  map.Encode(" hi\n", &hello);
  CHECK(hello == "\xC4\xA0hi\xC4\x8A");  // "Ġhi" + "Ċ"
}

TEST_CASE("ByteLevelMap rejects code points outside the map", "[tokenizer]") {
  const ByteLevelMap map;
  std::string out = "keep";
  CHECK_FALSE(map.Decode("a\xE4\xB8\xAD", &out));  // 中 is not a byte-level code point
  CHECK(out == "keep");
  CHECK_FALSE(map.Decode(" ", &out));  // a real space is spelled 'Ġ'
  CHECK_FALSE(map.Decode("\xFF", &out));
}

}  // namespace
}  // namespace dllm
