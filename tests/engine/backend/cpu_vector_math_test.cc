#include "engine/backend/cpu/cpu_vector_math.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "engine/backend/cpu/cpu_gemm.h"
#include "hwy/targets.h"
#include "tests/engine/backend/simd_test_util.h"

namespace dllm {
namespace {

using test::RandomVector;
using test::TargetGuard;

bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST_CASE("cpu_vector_math: CpuExpF is within 2 ulp of the exact exponential") {
  double worst_ulps = 0;
  float worst_x = 0;
  // Every 2^-10 step over the whole finite range, plus points near 0.
  for (double xd = -87.3; xd <= 88.7; xd += 1.0 / 1024) {
    for (float x : {static_cast<float>(xd), static_cast<float>(xd * 1e-6)}) {
      const double exact = std::exp(static_cast<double>(x));
      const float got = CpuExpF(x);
      // One ulp of the exact result (fp32 spacing at its magnitude).
      const double ulp = std::ldexp(1.0, std::ilogb(static_cast<float>(exact)) - 23);
      const double ulps = std::abs(got - exact) / ulp;
      if (ulps > worst_ulps) {
        worst_ulps = ulps;
        worst_x = x;
      }
    }
  }
  INFO("worst x = " << worst_x << " (" << worst_ulps << " ulp)");
  CHECK(worst_ulps <= 2.0);
  CHECK(CpuExpF(0.0f) == 1.0f);
  CHECK(CpuExpF(89.0f) == std::numeric_limits<float>::infinity());
  CHECK(CpuExpF(std::numeric_limits<float>::infinity()) == std::numeric_limits<float>::infinity());
  CHECK(CpuExpF(-88.0f) == 0.0f);
  CHECK(CpuExpF(-std::numeric_limits<float>::infinity()) == 0.0f);
  CHECK(std::isnan(CpuExpF(std::numeric_limits<float>::quiet_NaN())));
}

TEST_CASE("cpu_vector_math: SwiGLU is accurate against double precision") {
  const std::vector<float> g = RandomVector(4099, 1, 4.0f), u = RandomVector(4099, 2);
  std::vector<float> out(g.size());
  CpuSwiGlu(g.data(), u.data(), static_cast<int64_t>(g.size()), out.data());
  for (size_t i = 0; i < g.size(); ++i) {
    const double want = g[i] / (1.0 + std::exp(-static_cast<double>(g[i]))) * u[i];
    INFO("gate " << g[i] << " up " << u[i]);
    CHECK(std::abs(out[i] - want) <= 4e-7 * std::abs(want) + 1e-30);
  }
}

// Every target runs the scalar reference's operations: bit-identical results, at every
// length (vector bodies and scalar tails) and for the edge inputs.
TEST_CASE("cpu_vector_math: every SIMD target equals the scalar contract bit for bit") {
  TargetGuard guard;
  std::vector<float> g = RandomVector(1000, 3, 30.0f);
  const std::vector<float> u = RandomVector(1000, 4);
  const float edges[] = {0.0f,
                         -0.0f,
                         88.72f,
                         88.73f,
                         -87.33f,
                         -87.34f,
                         1e-30f,
                         -1e-30f,
                         100.0f,
                         -100.0f,
                         std::numeric_limits<float>::infinity(),
                         -std::numeric_limits<float>::infinity()};
  for (size_t i = 0; i < std::size(edges); ++i) g[i * 7] = edges[i];
  std::vector<float> want_silu(g.size()), want_exp(g.size());
  for (size_t i = 0; i < g.size(); ++i) {
    want_silu[i] = g[i] / (1.0f + CpuExpF(-g[i])) * u[i];
    want_exp[i] = CpuExpF(g[i] - 2.5f);
  }
  std::vector<std::string> seen;
  for (int64_t target : CpuGemmSupportedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    INFO("target " << hwy::TargetName(target));
    seen.push_back(hwy::TargetName(target));
    for (int64_t n : {int64_t{1}, int64_t{7}, int64_t{16}, int64_t{37}, int64_t{1000}}) {
      INFO("n = " << n);
      std::vector<float> silu(n), e(g.begin(), g.begin() + n);
      CpuSwiGlu(g.data(), u.data(), n, silu.data());
      CpuExpShifted(e.data(), n, 2.5f);
      CHECK(SameBits(silu, std::vector<float>(want_silu.begin(), want_silu.begin() + n)));
      CHECK(SameBits(e, std::vector<float>(want_exp.begin(), want_exp.begin() + n)));
    }
  }
  if (std::getenv("DLLM_TEST_SIMD_TARGET") == nullptr) CHECK(seen.size() >= 2);
}

}  // namespace
}  // namespace dllm
