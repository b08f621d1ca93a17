// CpuExpF-based kernels, compiled once per SIMD target by Highway and dispatched at run time.
// The vector code and the scalar reference run the same operations in the same order.

#ifndef HWY_DISABLED_TARGETS
#define HWY_DISABLED_TARGETS (HWY_SSSE3 | HWY_SSE4)
#endif

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "engine/backend/cpu/cpu_vector_math.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

#ifndef DLLM_ENGINE_BACKEND_CPU_CPU_VECTOR_MATH_SHARED_
#define DLLM_ENGINE_BACKEND_CPU_CPU_VECTOR_MATH_SHARED_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "engine/backend/cpu/cpu_vector_math.h"

namespace dllm::vmath {

// Cephes expf constants.
inline constexpr float kMaxX = 88.7228f;   // above: +inf
inline constexpr float kMinX = -87.3365f;  // below: +0 (2^n would leave the normal range)
inline constexpr float kLog2E = 1.44269504088896341f;
inline constexpr float kLn2Hi = 0.693359375f;  // exact in few bits: n * kLn2Hi is exact
inline constexpr float kLn2Lo = -2.12194440e-4f;
inline constexpr float kP0 = 1.9875691500e-4f;
inline constexpr float kP1 = 1.3981999507e-3f;
inline constexpr float kP2 = 8.3334519073e-3f;
inline constexpr float kP3 = 4.1665795894e-2f;
inline constexpr float kP4 = 1.6666665459e-1f;
inline constexpr float kP5 = 5.0000001201e-1f;

inline float BitsToFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

// The contract, one element.
inline float ExpScalar(float x) {
  if (std::isnan(x)) return x;
  if (x > kMaxX) return INFINITY;
  if (x < kMinX) return 0.0f;
  const float n = std::nearbyint(x * kLog2E);  // round half to even (default mode)
  float r = std::fma(n, -kLn2Hi, x);
  r = std::fma(n, -kLn2Lo, r);
  float p = kP0;
  p = std::fma(p, r, kP1);
  p = std::fma(p, r, kP2);
  p = std::fma(p, r, kP3);
  p = std::fma(p, r, kP4);
  p = std::fma(p, r, kP5);
  const float r2 = r * r;
  float y = std::fma(p, r2, r);
  y = y + 1.0f;
  // 2^n in two halves, so that n = -127 .. 128 (reachable at the clamp edges) stays exact.
  const int32_t ni = static_cast<int32_t>(n);
  const int32_t half = ni >> 1;  // floor(n / 2) (arithmetic shift, C++20)
  const float s1 = BitsToFloat(static_cast<uint32_t>(half + 127) << 23);
  const float s2 = BitsToFloat(static_cast<uint32_t>(ni - half + 127) << 23);
  return (y * s1) * s2;
}

inline float SiluTimes(float g, float u) {
  const float s = g / (1.0f + ExpScalar(-g));
  return s * u;
}

}  // namespace dllm::vmath

#endif  // DLLM_ENGINE_BACKEND_CPU_CPU_VECTOR_MATH_SHARED_

HWY_BEFORE_NAMESPACE();
namespace dllm {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

#if HWY_TARGET == HWY_EMU128 || HWY_TARGET == HWY_SCALAR
void SwiGluImpl(const float* gate, const float* up, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = vmath::SiluTimes(gate[i], up[i]);
}
void ExpShiftedImpl(float* s, int64_t n, float shift) {
  for (int64_t i = 0; i < n; ++i) s[i] = vmath::ExpScalar(s[i] - shift);
}
// These two targets compile without FMA instructions, so nothing can fuse the two roundings.
void AddScaledImpl(const float* x, int64_t n, float f, float* y) {
  for (int64_t i = 0; i < n; ++i) y[i] = y[i] + f * x[i];
}
#else
using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;

HWY_INLINE VF Exp(DF df, VF x) {
  const hn::RebindToSigned<DF> di;
  const auto is_nan = hn::IsNaN(x);
  const auto too_big = hn::Gt(x, hn::Set(df, vmath::kMaxX));
  const auto too_small = hn::Lt(x, hn::Set(df, vmath::kMinX));
  // Clamp only to keep the integer math in range; the masks pick the edge results.
  const VF xc = hn::Min(hn::Max(x, hn::Set(df, vmath::kMinX)), hn::Set(df, vmath::kMaxX));
  const VF n = hn::Round(hn::Mul(xc, hn::Set(df, vmath::kLog2E)));
  VF r = hn::MulAdd(n, hn::Set(df, -vmath::kLn2Hi), xc);
  r = hn::MulAdd(n, hn::Set(df, -vmath::kLn2Lo), r);
  VF p = hn::Set(df, vmath::kP0);
  p = hn::MulAdd(p, r, hn::Set(df, vmath::kP1));
  p = hn::MulAdd(p, r, hn::Set(df, vmath::kP2));
  p = hn::MulAdd(p, r, hn::Set(df, vmath::kP3));
  p = hn::MulAdd(p, r, hn::Set(df, vmath::kP4));
  p = hn::MulAdd(p, r, hn::Set(df, vmath::kP5));
  const VF r2 = hn::Mul(r, r);
  VF y = hn::MulAdd(p, r2, r);
  y = hn::Add(y, hn::Set(df, 1.0f));
  const auto ni = hn::ConvertTo(di, n);
  const auto half = hn::ShiftRight<1>(ni);  // arithmetic: floor(n / 2), as in ExpScalar
  const auto bias = hn::Set(di, 127);
  const VF s1 = hn::BitCast(df, hn::ShiftLeft<23>(hn::Add(half, bias)));
  const VF s2 = hn::BitCast(df, hn::ShiftLeft<23>(hn::Add(hn::Sub(ni, half), bias)));
  VF out = hn::Mul(hn::Mul(y, s1), s2);
  out = hn::IfThenElse(too_big, hn::Set(df, INFINITY), out);
  out = hn::IfThenElse(too_small, hn::Zero(df), out);
  return hn::IfThenElse(is_nan, x, out);
}

void SwiGluImpl(const float* gate, const float* up, int64_t n, float* out) {
  const DF df;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(df));
  const VF one = hn::Set(df, 1.0f);
  int64_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    const VF g = hn::LoadU(df, gate + i);
    const VF s = hn::Div(g, hn::Add(one, Exp(df, hn::Neg(g))));
    hn::StoreU(hn::Mul(s, hn::LoadU(df, up + i)), df, out + i);
  }
  for (; i < n; ++i) out[i] = vmath::SiluTimes(gate[i], up[i]);
}

void ExpShiftedImpl(float* s, int64_t n, float shift) {
  const DF df;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(df));
  const VF m = hn::Set(df, shift);
  int64_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    hn::StoreU(Exp(df, hn::Sub(hn::LoadU(df, s + i), m)), df, s + i);
  }
  for (; i < n; ++i) s[i] = vmath::ExpScalar(s[i] - shift);
}

void AddScaledImpl(const float* x, int64_t n, float f, float* y) {
  const DF df;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(df));
  const VF vf = hn::Set(df, f);
  int64_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    hn::StoreU(hn::Add(hn::LoadU(df, y + i), hn::Mul(vf, hn::LoadU(df, x + i))), df, y + i);
  }
  // The tail through one-lane vectors too: scalar code here could be contracted into an fma
  // (this target has them), which would round once instead of twice.
  const hn::CappedTag<float, 1> d1;
  for (; i < n; ++i) {
    hn::StoreU(hn::Add(hn::LoadU(d1, y + i), hn::Mul(hn::Set(d1, f), hn::LoadU(d1, x + i))), d1,
               y + i);
  }
}
#endif

}  // namespace HWY_NAMESPACE
}  // namespace dllm
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace dllm {

HWY_EXPORT(SwiGluImpl);
HWY_EXPORT(ExpShiftedImpl);
HWY_EXPORT(AddScaledImpl);

float CpuExpF(float x) { return vmath::ExpScalar(x); }

void CpuSwiGlu(const float* gate, const float* up, int64_t n, float* out) {
  if (n > 0) HWY_DYNAMIC_DISPATCH(SwiGluImpl)(gate, up, n, out);
}

void CpuExpShifted(float* s, int64_t n, float shift) {
  if (n > 0) HWY_DYNAMIC_DISPATCH(ExpShiftedImpl)(s, n, shift);
}

void CpuAddScaled(const float* x, int64_t n, float f, float* y) {
  if (n > 0) HWY_DYNAMIC_DISPATCH(AddScaledImpl)(x, n, f, y);
}

}  // namespace dllm
#endif  // HWY_ONCE
