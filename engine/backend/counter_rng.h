// Counter-based RNG: Philox4x32-10 (Salmon et al., SC'11, as in Random123 and cuRAND).
//
// A random number is a pure function of (seed, position, step, draw): no state, no order
// dependence, so a sequence's samples never depend on which other sequences share its batch,
// on thread scheduling, or on CPU vs GPU. `draw` numbers the values needed for one
// (position, step) key, e.g. the vocabulary id for Gumbel-max sampling.
//
// Mapping: key = seed (low 32 bits, high 32 bits); counter = (position, step, draw / 4,
// kDomain); output lane draw % 4. A different use can take a different domain word.
#ifndef DLLM_ENGINE_BACKEND_COUNTER_RNG_H_
#define DLLM_ENGINE_BACKEND_COUNTER_RNG_H_

#include <cstdint>

#include "engine/backend/device_inline.h"

namespace dllm {

struct Philox4x32 {
  uint32_t v[4];
};

DLLM_HD inline void PhiloxMulHiLo(uint32_t a, uint32_t b, uint32_t* hi, uint32_t* lo) {
  const uint64_t product = static_cast<uint64_t>(a) * static_cast<uint64_t>(b);
  *hi = static_cast<uint32_t>(product >> 32);
  *lo = static_cast<uint32_t>(product);
}

// Philox4x32 with 10 rounds on `counter` under `key0`, `key1`.
DLLM_HD inline Philox4x32 Philox4x32_10(Philox4x32 counter, uint32_t key0, uint32_t key1) {
  constexpr uint32_t kM0 = 0xD2511F53u;
  constexpr uint32_t kM1 = 0xCD9E8D57u;
  constexpr uint32_t kW0 = 0x9E3779B9u;
  constexpr uint32_t kW1 = 0xBB67AE85u;
  uint32_t c0 = counter.v[0], c1 = counter.v[1], c2 = counter.v[2], c3 = counter.v[3];
  for (int round = 0; round < 10; ++round) {
    uint32_t hi0, lo0, hi1, lo1;
    PhiloxMulHiLo(kM0, c0, &hi0, &lo0);
    PhiloxMulHiLo(kM1, c2, &hi1, &lo1);
    const uint32_t n0 = hi1 ^ c1 ^ key0;
    const uint32_t n2 = hi0 ^ c3 ^ key1;
    c0 = n0;
    c1 = lo1;
    c2 = n2;
    c3 = lo0;
    key0 += kW0;
    key1 += kW1;
  }
  return Philox4x32{{c0, c1, c2, c3}};
}

// Uniform float in the open interval (0, 1) from 32 random bits: the top 23 bits plus half
// an ulp, i.e. (k + 0.5) / 2^23. Every value is exactly representable, so neither 0 nor 1 is
// ever returned (safe for log(u) and log(-log(u))).
DLLM_HD inline float UniformFromBits(uint32_t bits) {
  return (static_cast<float>(bits >> 9) + 0.5f) * (1.0f / 8388608.0f);
}

// Domain word for sampling draws (ASCII "smpl").
constexpr uint32_t kRngDomainSample = 0x736d706cu;

// The four raw 32-bit words of block `draw / 4` for (seed, position, step).
DLLM_HD inline Philox4x32 CounterRandomBlock(uint64_t seed, int32_t position, int32_t step,
                                             uint32_t block, uint32_t domain = kRngDomainSample) {
  const Philox4x32 counter{
      {static_cast<uint32_t>(position), static_cast<uint32_t>(step), block, domain}};
  return Philox4x32_10(counter, static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
}

// Uniform (0, 1) for (seed, position, step, draw).
DLLM_HD inline float CounterUniform(uint64_t seed, int32_t position, int32_t step, uint32_t draw,
                                    uint32_t domain = kRngDomainSample) {
  const Philox4x32 block = CounterRandomBlock(seed, position, step, draw >> 2, domain);
  return UniformFromBits(block.v[draw & 3u]);
}

}  // namespace dllm

#endif  // DLLM_ENGINE_BACKEND_COUNTER_RNG_H_
