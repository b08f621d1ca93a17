#include "engine/decoding/utf8_stream.h"

#include <catch2/catch.hpp>

namespace dllm {
namespace {

TEST_CASE("Utf8Stream never splits a character", "[decoding][utf8]") {
  Utf8Stream s;
  CHECK(s.Append("ab") == "ab");
  CHECK(s.Append("\xE2") == "");  // first byte of €
  CHECK(s.Append("\x82") == "");  // second
  CHECK(s.Append("\xAC!") == "\xE2\x82\xAC!");
  CHECK(s.Append("\xF0\x9F") == "");  // half an emoji
  CHECK(s.Finish() == "\xEF\xBF\xBD");
  CHECK(s.Finish() == "");
}

TEST_CASE("Utf8Stream replaces invalid bytes", "[decoding][utf8]") {
  Utf8Stream s;
  CHECK(s.Append("a\xFF"
                 "b") ==
        "a\xEF\xBF\xBD"
        "b");
  CHECK(s.Append("\xE2\x28") == "\xEF\xBF\xBD(");             // broken sequence
  CHECK(s.Append("\xC0\x80") == "\xEF\xBF\xBD\xEF\xBF\xBD");  // overlong
  CHECK(s.Append("\xED\xA0\x80").find("\xEF\xBF\xBD") == 0);  // surrogate
}

}  // namespace
}  // namespace dllm
