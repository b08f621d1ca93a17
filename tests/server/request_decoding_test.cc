// IsValidUtf8: the check that refuses invalid UTF-8 in request strings (the gRPC and HTTP
// front ends both decode requests through server/request_decoding.h).
#include "server/request_decoding.h"

#include <catch2/catch.hpp>

namespace dllm {
namespace {

TEST_CASE("request_decoding: IsValidUtf8 agrees with the definition", "[utf8]") {
  CHECK(IsValidUtf8(""));
  CHECK(IsValidUtf8("plain ascii"));
  CHECK(IsValidUtf8("\xc3\xa9\xe2\x9c\x93\xf0\x9f\x98\x80\xf4\x8f\xbf\xbf"));
  size_t bad = 99;
  CHECK_FALSE(IsValidUtf8("ab\xff", &bad));
  CHECK(bad == 2);
  CHECK_FALSE(IsValidUtf8("\xc0\x80"));          // overlong NUL
  CHECK_FALSE(IsValidUtf8("\xe0\x80\xaf"));      // overlong
  CHECK_FALSE(IsValidUtf8("\xed\xbf\xbf"));      // surrogate
  CHECK_FALSE(IsValidUtf8("\xf4\x90\x80\x80"));  // above U+10FFFF
  CHECK_FALSE(IsValidUtf8("\xe2\x9c"));          // truncated
  CHECK_FALSE(IsValidUtf8("\x80"));              // stray continuation
}

}  // namespace
}  // namespace dllm
