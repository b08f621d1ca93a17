#include "engine/core/float16.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>

namespace dllm {
namespace {

// Independent bf16 rounding: pick the nearer of the two bf16 neighbours in double precision,
// ties to the even one.
uint16_t ReferenceBf16(float f) {
  if (std::isnan(f)) return 0x7fc0;
  const uint32_t bits = BitsFromFloat(f);
  const uint16_t lo = static_cast<uint16_t>(bits >> 16);
  if ((bits & 0xffffu) == 0) return lo;
  const uint16_t hi = static_cast<uint16_t>(lo + 1);  // next magnitude up (same sign)
  const double d_lo = std::fabs(static_cast<double>(f) - Bf16ToFloat(lo));
  // hi may be inf: treat the distance to inf as to 2^128 (IEEE overflow rounding).
  const double hi_value = std::isinf(Bf16ToFloat(hi)) ? std::copysign(std::ldexp(1.0, 128), f)
                                                      : static_cast<double>(Bf16ToFloat(hi));
  const double d_hi = std::fabs(static_cast<double>(f) - hi_value);
  if (d_lo < d_hi) return lo;
  if (d_hi < d_lo) return hi;
  return (lo & 1) ? hi : lo;
}

TEST_CASE("float16: bf16 widening and rounding", "[float16]") {
  CHECK(Bf16ToFloat(0x3f80) == 1.0f);
  CHECK(Bf16ToFloat(0xc000) == -2.0f);
  CHECK(std::isinf(Bf16ToFloat(0x7f80)));
  std::mt19937 rng(3);
  for (int i = 0; i < 200000; ++i) {
    const float f = FloatFromBits(rng());
    if (std::isnan(f)) {
      CHECK(std::isnan(RoundToBf16(f)));
      continue;
    }
    REQUIRE(FloatToBf16(f) == ReferenceBf16(f));
  }
  // Every bf16 survives a round trip.
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = Bf16ToFloat(static_cast<uint16_t>(h));
    if (!std::isnan(f)) REQUIRE(FloatToBf16(f) == h);
  }
  CHECK(FloatToBf16(std::numeric_limits<float>::max()) == 0x7f80);  // rounds to inf
}

TEST_CASE("float16: f16 conversions match the compiler's _Float16", "[float16]") {
  // GCC implements _Float16 conversions independently (libgcc / F16C).
  for (uint32_t h = 0; h < 0x10000; ++h) {
    _Float16 ref;
    const uint16_t h16 = static_cast<uint16_t>(h);
    std::memcpy(&ref, &h16, 2);
    const float want = static_cast<float>(ref);
    const float got = F16ToFloat(h16);
    if (std::isnan(want)) {
      REQUIRE(std::isnan(got));
    } else {
      REQUIRE(BitsFromFloat(got) == BitsFromFloat(want));
      REQUIRE(FloatToF16(got) == h16);
    }
  }
  std::mt19937 rng(5);
  for (int i = 0; i < 200000; ++i) {
    // Bias towards the f16 range so that subnormals and overflow are exercised.
    const float f = std::ldexp(std::uniform_real_distribution<float>(-2, 2)(rng),
                               std::uniform_int_distribution<int>(-30, 18)(rng));
    const _Float16 ref = static_cast<_Float16>(f);
    uint16_t want;
    std::memcpy(&want, &ref, 2);
    REQUIRE(FloatToF16(f) == want);
  }
}

}  // namespace
}  // namespace dllm
