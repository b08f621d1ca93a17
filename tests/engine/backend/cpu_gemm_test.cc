#include "engine/backend/cpu/cpu_gemm.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "hwy/targets.h"
#include "tests/engine/backend/simd_test_util.h"

namespace dllm {
namespace {

using test::RandomVector;
using test::TargetGuard;

// bf16 bits of v, rounded to nearest even (the test's own conversion).
uint16_t ToBf16(float v) {
  uint32_t u;
  std::memcpy(&u, &v, 4);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

float FromBf16(uint16_t b) {
  const uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// The numerics contract of cpu_gemm.h written out independently: one std::fma chain in
// increasing i from +0, then + bias, then y_old + v.
float ContractDot(const float* x, const float* w, int64_t k) {
  float acc = 0.0f;
  for (int64_t i = 0; i < k; ++i) acc = std::fma(x[i], w[i], acc);
  return acc;
}

struct Problem {
  int64_t rows, k, n;
  bool accumulate, bias, bf16;
};

struct Data {
  std::vector<float> x, w, bias, y0;
  std::vector<uint16_t> w_bf16;
  std::vector<float> packed_f32;      // w packed for CpuGemm
  std::vector<uint16_t> packed_bf16;  // w_bf16 packed
};

template <typename T>
std::vector<T> Pack(const std::vector<T>& w, GemmWeightType type, int64_t n, int64_t k) {
  std::vector<T> packed(static_cast<size_t>(PackedGemmWeightBytes(type, n, k)) / sizeof(T));
  PackGemmWeight(w.data(), type, n, k, packed.data());
  return packed;
}

Data MakeData(const Problem& p, uint32_t seed) {
  Data d;
  d.x = RandomVector(p.rows * p.k, seed);
  d.w = RandomVector(p.n * p.k, seed + 1);
  d.bias = RandomVector(p.n, seed + 2);
  d.y0 = RandomVector(p.rows * p.n, seed + 3);
  if (p.bf16) {
    d.w_bf16.resize(d.w.size());
    for (size_t i = 0; i < d.w.size(); ++i) {
      d.w_bf16[i] = ToBf16(d.w[i]);
      d.w[i] = FromBf16(d.w_bf16[i]);  // the reference sees the exact widening
    }
    d.packed_bf16 = Pack(d.w_bf16, GemmWeightType::kBF16, p.n, p.k);
  }
  d.packed_f32 = Pack(d.w, GemmWeightType::kF32, p.n, p.k);
  return d;
}

GemmWeight WeightOf(const Problem& p, const Data& d) {
  if (p.bf16) return {d.packed_bf16.data(), GemmWeightType::kBF16, p.n, p.k};
  return {d.packed_f32.data(), GemmWeightType::kF32, p.n, p.k};
}

std::vector<float> Reference(const Problem& p, const Data& d) {
  std::vector<float> y(d.y0);
  for (int64_t r = 0; r < p.rows; ++r) {
    for (int64_t o = 0; o < p.n; ++o) {
      float v = ContractDot(&d.x[r * p.k], &d.w[o * p.k], p.k);
      if (p.bias) v = v + d.bias[o];
      if (p.accumulate) v = d.y0[r * p.n + o] + v;
      y[r * p.n + o] = v;
    }
  }
  return y;
}

std::vector<float> Run(const Problem& p, const Data& d, int64_t row_begin, int64_t rows,
                       ThreadPool* pool) {
  std::vector<float> scratch;
  std::vector<float> y(d.y0.begin() + row_begin * p.n, d.y0.begin() + (row_begin + rows) * p.n);
  CpuGemm(&d.x[row_begin * p.k], rows, WeightOf(p, d), p.bias ? d.bias.data() : nullptr,
          p.accumulate, y.data(), pool, &scratch);
  return y;
}

const std::vector<Problem>& Problems() {
  static const std::vector<Problem> problems = {
      {37, 128, 160, false, false, false},  // tiny-model shapes; 37 rows: every tile tail
      {37, 384, 128, true, false, true},    // down-projection with the residual fused
      {21, 128, 96, false, true, true},     // Dream's q/k/v bias
      {9, 13, 7, false, true, false},       // n below one panel
      {9, 40, 11, true, true, false},       // odd n
      {6, 1024, 700, true, false, true},    // several panel groups (thread tasks)
      {13, 300, 200, false, true, false},   // n tail inside a panel
      {3, 4500, 40, true, true, true},      // three k blocks, partials parked in scratch
      {4, 2049, 33, false, true, false},    // one k value past a block, parked in y
  };
  return problems;
}

TEST_CASE("cpu_gemm: every SIMD target equals the scalar contract bit for bit") {
  TargetGuard guard;
  const std::vector<int64_t> targets = CpuGemmSupportedTargets();
  REQUIRE(!targets.empty());
  std::vector<std::string> seen;
  for (int64_t target : targets) {
    hwy::SetSupportedTargetsForTest(target);
    const std::string name = CpuGemmTargetName();
    INFO("target " << name);
    CHECK(name == hwy::TargetName(target));  // the force took effect
    seen.push_back(name);
    uint32_t seed = 10;
    for (const Problem& p : Problems()) {
      INFO("rows=" << p.rows << " k=" << p.k << " n=" << p.n << " acc=" << p.accumulate
                   << " bias=" << p.bias << " bf16=" << p.bf16);
      const Data d = MakeData(p, seed += 10);
      const std::vector<float> want = Reference(p, d);
      const std::vector<float> got = Run(p, d, 0, p.rows, nullptr);
      CHECK(std::memcmp(got.data(), want.data(), sizeof(float) * want.size()) == 0);
    }
  }
  // The baseline (no-FMA) path is always compiled; on any x86-64 CPU with FMA at least one
  // vector target runs as well (unless the run forces one target: tests/catch_main.cc).
  if (std::getenv("DLLM_TEST_SIMD_TARGET") == nullptr) CHECK(seen.size() >= 2);
}

// Each row must come out bit-identical whatever the other rows are, how many there are, where
// the row sits in the call and how many threads run: what batch invariance rests on.
TEST_CASE("cpu_gemm: rows are invariant to batch size, offset and threads on every target") {
  TargetGuard guard;
  ThreadPool pool3(3);
  for (int64_t target : CpuGemmSupportedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    INFO("target " << hwy::TargetName(target));
    uint32_t seed = 100;
    for (const Problem& p : Problems()) {
      const Data d = MakeData(p, seed += 10);
      std::vector<float> alone(p.rows * p.n);
      for (int64_t r = 0; r < p.rows; ++r) {
        const std::vector<float> one = Run(p, d, r, 1, nullptr);
        std::memcpy(&alone[r * p.n], one.data(), sizeof(float) * p.n);
      }
      for (int64_t rows : {int64_t{2}, int64_t{3}, int64_t{5}, p.rows - 1, p.rows}) {
        for (int64_t offset : {int64_t{0}, int64_t{1}, p.rows - rows}) {
          if (rows <= 0 || offset < 0 || offset + rows > p.rows) continue;
          INFO("k=" << p.k << " n=" << p.n << " rows=" << rows << " offset=" << offset);
          const std::vector<float> y = Run(p, d, offset, rows, &pool3);
          CHECK(std::memcmp(y.data(), &alone[offset * p.n], sizeof(float) * rows * p.n) == 0);
        }
      }
    }
  }
}

TEST_CASE("cpu_gemm: bf16 weights give the bits of their fp32 widening") {
  const Problem p{11, 256, 96, true, true, true};
  const Data d = MakeData(p, 7);  // d.w holds the exact widening of d.w_bf16
  std::vector<float> scratch;
  std::vector<float> y_bf16(d.y0.begin(), d.y0.end()), y_f32(d.y0.begin(), d.y0.end());
  CpuGemm(d.x.data(), p.rows, {d.packed_bf16.data(), GemmWeightType::kBF16, p.n, p.k},
          d.bias.data(), true, y_bf16.data(), nullptr, &scratch);
  CpuGemm(d.x.data(), p.rows, {d.packed_f32.data(), GemmWeightType::kF32, p.n, p.k}, d.bias.data(),
          true, y_f32.data(), nullptr, &scratch);
  CHECK(std::memcmp(y_bf16.data(), y_f32.data(), sizeof(float) * y_f32.size()) == 0);
}

TEST_CASE("cpu_gemm: accurate against a double-precision product") {
  const Problem p{5, 2048, 64, true, true, false};
  const Data d = MakeData(p, 3);
  const std::vector<float> y = Run(p, d, 0, p.rows, nullptr);
  double max_err = 0, max_ref = 0;
  for (int64_t r = 0; r < p.rows; ++r) {
    for (int64_t o = 0; o < p.n; ++o) {
      double dot = 0;
      for (int64_t i = 0; i < p.k; ++i)
        dot += static_cast<double>(d.x[r * p.k + i]) * d.w[o * p.k + i];
      const double ref = d.y0[r * p.n + o] + (dot + d.bias[o]);
      max_err = std::max(max_err, std::abs(ref - y[r * p.n + o]));
      max_ref = std::max(max_ref, std::abs(ref));
    }
  }
  CHECK(max_ref > 1);
  CHECK(max_err <= 2e-6 * max_ref * std::sqrt(static_cast<double>(p.k)));
}

TEST_CASE("cpu_gemm: the packed layout holds every element of w") {
  for (const Problem& p : Problems()) {
    const Data d = MakeData(p, 5);
    for (const GemmWeight& w :
         {GemmWeight{d.packed_f32.data(), GemmWeightType::kF32, p.n, p.k}, WeightOf(p, d)}) {
      for (int64_t o = 0; o < p.n; ++o) {
        for (int64_t i = 0; i < p.k; ++i) {
          if (PackedGemmWeightAt(w, o, i) != d.w[o * p.k + i]) {
            FAIL("w[" << o << "][" << i << "] n=" << p.n << " k=" << p.k);
          }
        }
      }
    }
  }
}

TEST_CASE("cpu_gemm: zero rows and zero columns are no-ops") {
  std::vector<float> x(16, 1.0f), w(16, 1.0f), y(4, 5.0f), scratch;
  CpuGemm(x.data(), 0, {w.data(), GemmWeightType::kF32, 1, 16}, nullptr, false, y.data(), nullptr,
          &scratch);
  CpuGemm(x.data(), 1, {w.data(), GemmWeightType::kF32, 0, 16}, nullptr, false, y.data(), nullptr,
          &scratch);
  CHECK(y == std::vector<float>(4, 5.0f));
}

}  // namespace
}  // namespace dllm
