// Bit-exact conversions between fp32 and the two 16-bit float formats found in checkpoints.
//
// bf16 is the upper half of an fp32 (1 sign, 8 exponent, 7 mantissa bits); IEEE fp16 has
// 1 sign, 5 exponent, 10 mantissa bits. Widening either to fp32 is exact. Narrowing rounds to
// nearest, ties to even (what PyTorch's .to(bfloat16) / .half() do), and keeps NaN a NaN.
// Header-only and dependency-free so that kernels, tests and tools can share it.
#ifndef DLLM_ENGINE_CORE_FLOAT16_H_
#define DLLM_ENGINE_CORE_FLOAT16_H_

#include <cstdint>
#include <cstring>

namespace dllm {

inline float FloatFromBits(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

inline uint32_t BitsFromFloat(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  return bits;
}

inline float Bf16ToFloat(uint16_t h) { return FloatFromBits(static_cast<uint32_t>(h) << 16); }

// Round to nearest even; NaN stays a (quiet) NaN with its sign.
inline uint16_t FloatToBf16(float f) {
  const uint32_t bits = BitsFromFloat(f);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x0040u);
  const uint32_t rounding_bias = 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>((bits + rounding_bias) >> 16);
}

// Rounds an fp32 to the nearest bf16 value and returns it widened (a "bf16 round trip").
inline float RoundToBf16(float f) { return Bf16ToFloat(FloatToBf16(f)); }

inline float F16ToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu;
  uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0x1f) {  // inf / NaN
    return FloatFromBits(sign | 0x7f800000u | (mantissa << 13));
  }
  if (exponent != 0) {  // normal: rebias 15 -> 127
    return FloatFromBits(sign | ((exponent + 112u) << 23) | (mantissa << 13));
  }
  if (mantissa == 0) return FloatFromBits(sign);  // signed zero
  // Subnormal: value = mantissa * 2^-24; normalise it into an fp32 normal.
  int shift = 0;
  while ((mantissa & 0x400u) == 0) {
    mantissa <<= 1;
    ++shift;
  }
  mantissa &= 0x3ffu;
  const uint32_t fp32_exponent = static_cast<uint32_t>(113 - shift);
  return FloatFromBits(sign | (fp32_exponent << 23) | (mantissa << 13));
}

// Round to nearest even, overflow to inf, NaN stays NaN.
inline uint16_t FloatToF16(float f) {
  const uint32_t bits = BitsFromFloat(f);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const uint32_t abs_bits = bits & 0x7fffffffu;
  if (abs_bits > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);   // NaN
  if (abs_bits >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // >= 65520: inf
  if (abs_bits < 0x38800000u) {
    // Result is subnormal (or zero) in fp16: value / 2^-24, rounded to nearest even.
    if (abs_bits < 0x33000000u) return sign;  // below half the smallest subnormal
    const uint32_t exponent = abs_bits >> 23;
    const uint32_t mantissa = (abs_bits & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126u - exponent;  // in [14, 24]
    uint32_t result = mantissa >> shift;
    const uint32_t remainder = mantissa & ((1u << shift) - 1u);
    const uint32_t half = 1u << (shift - 1u);
    if (remainder > half || (remainder == half && (result & 1u))) ++result;
    return static_cast<uint16_t>(sign | result);
  }
  // Normal: rebias 127 -> 15 and round the 13 dropped mantissa bits.
  uint32_t rebased = abs_bits - 0x38000000u;  // exponent - 112
  const uint32_t remainder = rebased & 0x1fffu;
  uint32_t result = rebased >> 13;
  if (remainder > 0x1000u || (remainder == 0x1000u && (result & 1u))) ++result;
  return static_cast<uint16_t>(sign | result);
}

}  // namespace dllm

#endif  // DLLM_ENGINE_CORE_FLOAT16_H_
