// Per-element and per-row math shared by the CPU backend and the CUDA kernels.
//
// Everything here is `DLLM_HD` inline so that one definition serves host code and device
// kernels; the CPU backend calls these exact functions, so CPU unit tests exercise them.
// Row-level helpers (RmsNormRow, ...) accumulate sequentially in index order; a parallel
// device reduction uses the element-level pieces and the Merge functions instead.
//
// Rounding: products and sums are written as separate operations. On the host (x86-64
// without -ffp-contract=fast and without FMA in the target) they round individually; in
// device code MulRn/AddRn force the same (nvcc would otherwise contract to FMA).
#ifndef DLLM_ENGINE_BACKEND_KERNEL_MATH_H_
#define DLLM_ENGINE_BACKEND_KERNEL_MATH_H_

#include <cmath>
#include <cstdint>
#include <cstring>

#include "engine/backend/device_inline.h"

namespace dllm {
namespace kmath {

// ---- Rounding helpers ------------------------------------------------------------------

DLLM_HD inline float MulRn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}

DLLM_HD inline float AddRn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}

DLLM_HD inline uint32_t FloatBits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
#endif
}

DLLM_HD inline float BitsToFloat(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
#endif
}

// fp32 → nearest bf16 (ties to even) → fp32. NaN stays NaN.
DLLM_HD inline float RoundBf16(float f) {
  const uint32_t bits = FloatBits(f);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return BitsToFloat(bits | 0x00400000u);
  const uint32_t rounded = (bits + 0x7fffu + ((bits >> 16) & 1u)) & 0xffff0000u;
  return BitsToFloat(rounded);
}

// ---- RMSNorm ---------------------------------------------------------------------------

// 1 / sqrt(mean + eps) from the sum of squares of n values.
DLLM_HD inline float RmsInvRms(float sum_squares, int n, float eps) {
  return 1.0f / sqrtf(AddRn(sum_squares / static_cast<float>(n), eps));
}

// One element of the normalized row: (x * inv_rms) * weight, in the reference's order.
DLLM_HD inline float RmsNormElement(float x, float inv_rms, float weight) {
  return MulRn(MulRn(x, inv_rms), weight);
}

// out[i] = x[i] * rsqrt(mean(x^2) + eps) * w[i]; the sum runs in index order. out may alias x.
DLLM_HD inline void RmsNormRow(const float* x, const float* w, int n, float eps, float* out) {
  float sum_squares = 0.0f;
  for (int i = 0; i < n; ++i) sum_squares = AddRn(sum_squares, MulRn(x[i], x[i]));
  const float inv_rms = RmsInvRms(sum_squares, n, eps);
  for (int i = 0; i < n; ++i) out[i] = RmsNormElement(x[i], inv_rms, w[i]);
}

// ---- RoPE (rotate-half / NeoX) ---------------------------------------------------------

// inv_freq[j] = 1 / theta^(2j / head_dim), computed in fp32 as PyTorch does
// (theta ** (arange(0, d, 2).float() / d)).
DLLM_HD inline float RopeInvFreq(int j, int head_dim, float theta) {
  const float exponent = static_cast<float>(2 * j) / static_cast<float>(head_dim);
  return 1.0f / powf(theta, exponent);
}

// The rotation angle of pair j at absolute position `position` (fp32 product).
DLLM_HD inline float RopeAngle(int position, float inv_freq) {
  return MulRn(static_cast<float>(position), inv_freq);
}

// Rotates the pair (x0 = x[j], x1 = x[j + d/2]) in fp32 (LLaDA):
//   y0 = x0*cos - x1*sin, y1 = x1*cos + x0*sin, each product and sum rounded once.
DLLM_HD inline void RopeRotatePair(float x0, float x1, float c, float s, float* y0, float* y1) {
  *y0 = AddRn(MulRn(x0, c), MulRn(-x1, s));
  *y1 = AddRn(MulRn(x1, c), MulRn(x0, s));
}

// Dream's bf16 flavour: x, cos, sin are bf16 values (callers round them with RoundBf16);
// each product and the sum are rounded to bf16.
DLLM_HD inline void RopeRotatePairBf16(float x0, float x1, float c, float s, float* y0, float* y1) {
  *y0 = RoundBf16(AddRn(RoundBf16(MulRn(x0, c)), RoundBf16(MulRn(-x1, s))));
  *y1 = RoundBf16(AddRn(RoundBf16(MulRn(x1, c)), RoundBf16(MulRn(x0, s))));
}

// ---- Activations -----------------------------------------------------------------------

DLLM_HD inline float Silu(float x) { return x / (1.0f + expf(-x)); }

DLLM_HD inline float SwiGluElement(float gate, float up) { return MulRn(Silu(gate), up); }

// bf16 reference rounding (docs/models.md section 5), for backends with bf16 activations:
// RMSNorm rounds x * inv_rms to bf16 before the weight multiply and the product again;
// SwiGLU rounds silu(gate) and the product.
DLLM_HD inline float RmsNormElementBf16(float x, float inv_rms, float weight) {
  return RoundBf16(MulRn(RoundBf16(MulRn(x, inv_rms)), weight));
}

DLLM_HD inline float SwiGluElementBf16(float gate, float up) {
  return RoundBf16(MulRn(RoundBf16(Silu(gate)), up));
}

// ---- Online softmax (attention) --------------------------------------------------------

// Running max and normalizer of exp(score - max) over the scores seen so far.
struct OnlineSoftmax {
  float max = -INFINITY;
  float sum = 0.0f;
};

// Folds `score` in. Afterwards the caller multiplies its running weighted accumulators by
// *rescale and adds *weight times the new value vector.
DLLM_HD inline void OnlineSoftmaxAdd(OnlineSoftmax* state, float score, float* rescale,
                                     float* weight) {
  if (score > state->max) {
    *rescale = (state->max == -INFINITY) ? 0.0f : expf(state->max - score);
    *weight = 1.0f;
    state->max = score;
  } else {
    *rescale = 1.0f;
    *weight = expf(score - state->max);
  }
  state->sum = AddRn(MulRn(state->sum, *rescale), *weight);
}

// Combines two partial states (a parallel split of the keys): accumulators of `a` scale by
// *scale_a, those of `b` by *scale_b; the result is written to `a`.
DLLM_HD inline void OnlineSoftmaxMerge(OnlineSoftmax* a, const OnlineSoftmax& b, float* scale_a,
                                       float* scale_b) {
  const float m = a->max > b.max ? a->max : b.max;
  *scale_a = (a->max == -INFINITY) ? 0.0f : expf(a->max - m);
  *scale_b = (b.max == -INFINITY) ? 0.0f : expf(b.max - m);
  a->sum = AddRn(MulRn(a->sum, *scale_a), MulRn(b.sum, *scale_b));
  a->max = m;
}

// ---- Logits statistics -----------------------------------------------------------------

// Streaming softmax entropy: with m the running max, sum = Σ exp(l - m) and
// weighted = Σ exp(l - m) (l - m). Then H = log(sum) - weighted / sum, p(l) = exp(l - m)/sum.
struct EntropyState {
  float max = -INFINITY;
  float sum = 0.0f;
  float weighted = 0.0f;
};

DLLM_HD inline void EntropyAdd(EntropyState* s, float logit) {
  if (logit > s->max) {
    if (s->max == -INFINITY) {
      s->sum = 1.0f;
      s->weighted = 0.0f;
    } else {
      // Re-reference to the new max: each old term gains (old_max - new_max) in its log.
      const float shift = s->max - logit;  // < 0
      const float a = expf(shift);
      s->weighted = MulRn(AddRn(s->weighted, MulRn(s->sum, shift)), a);
      s->sum = AddRn(MulRn(s->sum, a), 1.0f);
    }
    s->max = logit;
  } else {
    const float d = logit - s->max;
    const float e = expf(d);
    s->sum = AddRn(s->sum, e);
    s->weighted = AddRn(s->weighted, MulRn(e, d));
  }
}

DLLM_HD inline void EntropyMerge(EntropyState* a, const EntropyState& b) {
  if (b.max == -INFINITY) return;
  if (a->max == -INFINITY) {
    *a = b;
    return;
  }
  const float m = a->max > b.max ? a->max : b.max;
  const float da = a->max - m, db = b.max - m;
  const float ea = expf(da), eb = expf(db);
  a->weighted = AddRn(MulRn(AddRn(a->weighted, MulRn(a->sum, da)), ea),
                      MulRn(AddRn(b.weighted, MulRn(b.sum, db)), eb));
  a->sum = AddRn(MulRn(a->sum, ea), MulRn(b.sum, eb));
  a->max = m;
}

DLLM_HD inline float EntropyNats(const EntropyState& s) {
  const float h = logf(s.sum) - s.weighted / s.sum;
  return h > 0.0f ? h : 0.0f;  // rounding can give -0 / tiny negatives for one-hot rows
}

// Probability of a logit under the finished state.
DLLM_HD inline float EntropyStateProb(const EntropyState& s, float logit) {
  return expf(logit - s.max) / s.sum;
}

// log softmax of a logit under the finished state: (logit - max) - log(sum). Two rounded
// subtractions, so CPU and CUDA agree up to their logf.
DLLM_HD inline float EntropyStateLogProb(const EntropyState& s, float logit) {
  return (logit - s.max) - logf(s.sum);
}

// The two largest values with their ids; ties go to the lower id (torch.argmax's rule).
struct Top2 {
  float value1 = -INFINITY;
  int32_t id1 = -1;
  float value2 = -INFINITY;
  int32_t id2 = -1;
};

// True when (v, id) ranks before (w, jd): larger value, or equal value and lower id.
DLLM_HD inline bool RanksBefore(float v, int32_t id, float w, int32_t jd) {
  return v > w || (v == w && (jd < 0 || (id >= 0 && id < jd)));
}

DLLM_HD inline void Top2Add(Top2* t, float value, int32_t id) {
  if (RanksBefore(value, id, t->value1, t->id1)) {
    t->value2 = t->value1;
    t->id2 = t->id1;
    t->value1 = value;
    t->id1 = id;
  } else if (RanksBefore(value, id, t->value2, t->id2)) {
    t->value2 = value;
    t->id2 = id;
  }
}

DLLM_HD inline void Top2Merge(Top2* a, const Top2& b) {
  if (b.id1 >= 0) Top2Add(a, b.value1, b.id1);
  if (b.id2 >= 0) Top2Add(a, b.value2, b.id2);
}

// ---- Sampling --------------------------------------------------------------------------

// Standard Gumbel variate from a uniform in (0, 1).
DLLM_HD inline float GumbelFromUniform(float u) { return -logf(-logf(u)); }

// Gumbel-max score of a token: argmax over kept tokens of (logit / T + g) is an exact sample
// from softmax(logits / T) restricted to the kept tokens.
DLLM_HD inline float GumbelScore(float logit, float temperature, float uniform) {
  return AddRn(logit / temperature, GumbelFromUniform(uniform));
}

}  // namespace kmath
}  // namespace dllm

#endif  // DLLM_ENGINE_BACKEND_KERNEL_MATH_H_
