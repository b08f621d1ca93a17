#include "engine/backend/counter_rng.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <set>

namespace dllm {
namespace {

TEST_CASE("counter_rng: Philox4x32-10 matches the Random123 known answers") {
  struct Kat {
    Philox4x32 counter;
    uint32_t key0, key1;
    Philox4x32 expected;
  };
  const Kat kats[] = {
      {{{0, 0, 0, 0}}, 0, 0, {{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}}},
      {{{0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu}},
       0xffffffffu,
       0xffffffffu,
       {{0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}}},
      {{{0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u}},
       0xa4093822u,
       0x299f31d0u,
       {{0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}}},
  };
  for (const Kat& k : kats) {
    const Philox4x32 got = Philox4x32_10(k.counter, k.key0, k.key1);
    for (int i = 0; i < 4; ++i) CHECK(got.v[i] == k.expected.v[i]);
  }
}

TEST_CASE("counter_rng: uniforms are in (0, 1) and a pure function of the key") {
  CHECK(UniformFromBits(0) > 0.0f);
  CHECK(UniformFromBits(0xffffffffu) < 1.0f);
  CHECK(std::isfinite(std::log(-std::log(UniformFromBits(0)))));
  CHECK(std::isfinite(std::log(-std::log(UniformFromBits(0xffffffffu)))));
  const float a = CounterUniform(42, 7, 3, 11);
  CHECK(a == CounterUniform(42, 7, 3, 11));
  std::set<float> distinct = {a,
                              CounterUniform(43, 7, 3, 11),
                              CounterUniform(42, 8, 3, 11),
                              CounterUniform(42, 7, 4, 11),
                              CounterUniform(42, 7, 3, 12),
                              CounterUniform(uint64_t{42} | (uint64_t{1} << 40), 7, 3, 11)};
  CHECK(distinct.size() == 6);
}

TEST_CASE("counter_rng: uniforms have the moments of U(0, 1)") {
  double sum = 0, sum_sq = 0;
  const int n = 200000;
  for (int i = 0; i < n; ++i) {
    const double u = CounterUniform(1, i % 1000, i / 1000, static_cast<uint32_t>(i));
    sum += u;
    sum_sq += u * u;
  }
  CHECK(sum / n == Approx(0.5).margin(0.005));
  CHECK(sum_sq / n - (sum / n) * (sum / n) == Approx(1.0 / 12).margin(0.002));
}

}  // namespace
}  // namespace dllm
