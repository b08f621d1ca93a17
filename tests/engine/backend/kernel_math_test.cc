#include "engine/backend/kernel_math.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <random>
#include <vector>

namespace dllm {
namespace {

using kmath::EntropyState;
using kmath::Top2;

// Two-pass double-precision entropy: the independent reference.
double ReferenceEntropy(const std::vector<float>& logits) {
  double m = -INFINITY;
  for (float l : logits) m = std::max(m, static_cast<double>(l));
  double s = 0;
  for (float l : logits) s += std::exp(l - m);
  double h = 0;
  for (float l : logits) {
    const double p = std::exp(l - m) / s;
    if (p > 0) h -= p * std::log(p);
  }
  return h;
}

TEST_CASE("kernel_math: entropy of a uniform row is ln V") {
  for (int v : {1, 2, 7, 1000, 152064}) {
    EntropyState s;
    for (int i = 0; i < v; ++i) kmath::EntropyAdd(&s, 3.25f);
    CHECK(kmath::EntropyNats(s) ==
          Approx(std::log(static_cast<double>(v))).epsilon(1e-5).margin(1e-6));
    CHECK(kmath::EntropyStateProb(s, 3.25f) == Approx(1.0 / v).epsilon(1e-5));
  }
}

TEST_CASE("kernel_math: entropy of a one-hot row is 0") {
  EntropyState s;
  kmath::EntropyAdd(&s, 0.0f);
  kmath::EntropyAdd(&s, 200.0f);
  for (int i = 0; i < 100; ++i) kmath::EntropyAdd(&s, -300.0f);
  CHECK(kmath::EntropyNats(s) == Approx(0.0).margin(1e-6));
  CHECK(kmath::EntropyStateProb(s, 200.0f) == Approx(1.0));
}

TEST_CASE("kernel_math: streaming entropy matches a two-pass double reference") {
  std::mt19937 gen(7);
  for (float scale : {0.1f, 1.0f, 5.0f, 30.0f}) {
    std::normal_distribution<float> d(0.0f, scale);
    std::vector<float> logits(5000);
    for (float& l : logits) l = d(gen);
    EntropyState s;
    for (float l : logits) kmath::EntropyAdd(&s, l);
    CHECK(kmath::EntropyNats(s) == Approx(ReferenceEntropy(logits)).epsilon(1e-4).margin(1e-5));

    // A split into two halves merged must agree with the sequential stream.
    EntropyState a, b;
    for (size_t i = 0; i < logits.size(); ++i) kmath::EntropyAdd(i < 1234 ? &a : &b, logits[i]);
    kmath::EntropyMerge(&a, b);
    CHECK(kmath::EntropyNats(a) == Approx(ReferenceEntropy(logits)).epsilon(1e-4).margin(1e-5));
    CHECK(a.max == s.max);
  }
}

TEST_CASE("kernel_math: top-2 breaks ties toward the lowest id") {
  Top2 t;
  const float values[] = {1.0f, 3.0f, 2.0f, 3.0f, 3.0f, -1.0f};
  for (int i = 0; i < 6; ++i) kmath::Top2Add(&t, values[i], i);
  CHECK(t.id1 == 1);
  CHECK(t.value1 == 3.0f);
  CHECK(t.id2 == 3);  // second of the tied 3.0s
  CHECK(t.value2 == 3.0f);

  Top2 a, b;
  for (int i = 0; i < 6; ++i) kmath::Top2Add(i % 2 ? &a : &b, values[i], i);
  kmath::Top2Merge(&b, a);
  CHECK(b.id1 == 1);
  CHECK(b.id2 == 3);

  Top2 single;
  kmath::Top2Add(&single, 5.0f, 4);
  CHECK(single.id1 == 4);
  CHECK(single.id2 == -1);
}

TEST_CASE("kernel_math: online softmax gives the softmax-weighted average") {
  std::mt19937 gen(3);
  std::normal_distribution<float> d(0.0f, 4.0f);
  std::vector<float> scores(300), values(300);
  for (int i = 0; i < 300; ++i) {
    scores[i] = d(gen);
    values[i] = d(gen);
  }
  kmath::OnlineSoftmax state;
  float acc = 0;
  for (int i = 0; i < 300; ++i) {
    float rescale, weight;
    kmath::OnlineSoftmaxAdd(&state, scores[i], &rescale, &weight);
    acc = acc * rescale + weight * values[i];
  }
  double m = -INFINITY, s = 0, ref = 0;
  for (float x : scores) m = std::max(m, static_cast<double>(x));
  for (int i = 0; i < 300; ++i) {
    s += std::exp(scores[i] - m);
    ref += std::exp(scores[i] - m) * values[i];
  }
  CHECK(acc / state.sum == Approx(ref / s).epsilon(1e-5));
  CHECK(state.sum == Approx(s).epsilon(1e-5));

  // Merge of two halves.
  kmath::OnlineSoftmax a, b;
  float acc_a = 0, acc_b = 0;
  for (int i = 0; i < 300; ++i) {
    float rescale, weight;
    kmath::OnlineSoftmax* st = i < 100 ? &a : &b;
    float* ac = i < 100 ? &acc_a : &acc_b;
    kmath::OnlineSoftmaxAdd(st, scores[i], &rescale, &weight);
    *ac = *ac * rescale + weight * values[i];
  }
  float sa, sb;
  kmath::OnlineSoftmaxMerge(&a, b, &sa, &sb);
  CHECK((acc_a * sa + acc_b * sb) / a.sum == Approx(ref / s).epsilon(1e-5));
}

TEST_CASE("kernel_math: RMSNorm row matches a double reference") {
  std::vector<float> x = {1.0f, -2.0f, 3.0f, 0.5f}, w = {1.0f, 0.5f, 2.0f, -1.0f}, out(4);
  kmath::RmsNormRow(x.data(), w.data(), 4, 1e-5f, out.data());
  const double ms = (1.0 + 4.0 + 9.0 + 0.25) / 4.0;
  const double inv = 1.0 / std::sqrt(ms + 1e-5);
  for (int i = 0; i < 4; ++i) CHECK(out[i] == Approx(x[i] * inv * w[i]).epsilon(1e-6));
  // In place.
  kmath::RmsNormRow(x.data(), w.data(), 4, 1e-5f, x.data());
  for (int i = 0; i < 4; ++i) CHECK(x[i] == out[i]);
}

TEST_CASE("kernel_math: RoPE frequencies and rotation") {
  CHECK(kmath::RopeInvFreq(0, 128, 500000.0f) == 1.0f);
  for (int j : {1, 17, 63}) {
    CHECK(kmath::RopeInvFreq(j, 128, 500000.0f) ==
          Approx(std::pow(500000.0, -2.0 * j / 128.0)).epsilon(1e-6));
  }
  // Rotation by angle a: a plain 2-D rotation (norm preserved; position 0 is the identity).
  float y0, y1;
  kmath::RopeRotatePair(3.0f, 4.0f, 1.0f, 0.0f, &y0, &y1);
  CHECK(y0 == 3.0f);
  CHECK(y1 == 4.0f);
  const float a = kmath::RopeAngle(7, 0.3f);
  CHECK(a == Approx(2.1f));
  kmath::RopeRotatePair(3.0f, 4.0f, std::cos(a), std::sin(a), &y0, &y1);
  CHECK(y0 == Approx(3.0 * std::cos(2.1) - 4.0 * std::sin(2.1)).epsilon(1e-5));
  CHECK(y1 == Approx(4.0 * std::cos(2.1) + 3.0 * std::sin(2.1)).epsilon(1e-5));
  CHECK(y0 * y0 + y1 * y1 == Approx(25.0).epsilon(1e-5));
  // bf16 flavour: results are bf16 values close to the fp32 ones.
  float b0, b1;
  kmath::RopeRotatePairBf16(kmath::RoundBf16(3.0f), kmath::RoundBf16(4.0f),
                            kmath::RoundBf16(std::cos(a)), kmath::RoundBf16(std::sin(a)), &b0, &b1);
  CHECK(b0 == kmath::RoundBf16(b0));
  CHECK(b0 == Approx(y0).epsilon(2e-2));
  CHECK(b1 == Approx(y1).epsilon(2e-2));
}

TEST_CASE("kernel_math: bf16 rounding is round-to-nearest-even") {
  CHECK(kmath::RoundBf16(1.0f) == 1.0f);
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties to even -> 1.
  CHECK(kmath::RoundBf16(1.0f + 1.0f / 256) == 1.0f);
  // 1 + 3*2^-8 is halfway between 1+2^-7 and 1+2^-6: ties to even -> 1 + 2^-6.
  CHECK(kmath::RoundBf16(1.0f + 3.0f / 256) == 1.0f + 1.0f / 64);
  CHECK(kmath::RoundBf16(1.0f + 1.0f / 256 + 1.0f / 4096) == 1.0f + 1.0f / 128);
  CHECK(std::isnan(kmath::RoundBf16(NAN)));
  CHECK(std::isinf(kmath::RoundBf16(INFINITY)));
}

TEST_CASE("kernel_math: activations and Gumbel transform") {
  CHECK(kmath::Silu(0.0f) == 0.0f);
  CHECK(kmath::Silu(2.0f) == Approx(2.0 / (1.0 + std::exp(-2.0))));
  CHECK(kmath::SwiGluElement(1.0f, 3.0f) == Approx(3.0 / (1.0 + std::exp(-1.0))));
  // Gumbel CDF: P(G <= g) = exp(-exp(-g)); the transform is its inverse.
  for (float u : {0.01f, 0.3f, 0.5f, 0.99f}) {
    const float g = kmath::GumbelFromUniform(u);
    CHECK(std::exp(-std::exp(-g)) == Approx(u).epsilon(1e-5));
  }
  CHECK(kmath::GumbelScore(2.0f, 0.5f, 0.5f) ==
        Approx(4.0f + kmath::GumbelFromUniform(0.5f)).epsilon(1e-6));
}

}  // namespace
}  // namespace dllm
