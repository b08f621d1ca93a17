#include "engine/backend/cpu/cpu_chain_gemm.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "engine/backend/cpu/cpu_gemm.h"  // CpuGemmSupportedTargets: the same compiled targets
#include "hwy/targets.h"
#include "tests/engine/backend/simd_test_util.h"

namespace dllm {
namespace {

using test::RandomVector;
using test::TargetGuard;

struct Shape {
  int64_t rows, k, n;
};

// Row tails, column tails shorter than a vector, k = 0, attention-like shapes.
const Shape kShapes[] = {{1, 1, 1},  {7, 64, 512},  {13, 32, 37}, {6, 600, 64},
                         {5, 0, 20}, {25, 64, 200}, {3, 9, 16}};

TEST_CASE("cpu_chain_gemm: every SIMD target equals a scalar std::fma chain bit for bit") {
  TargetGuard guard;
  for (int64_t target : CpuGemmSupportedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    INFO("target " << hwy::TargetName(target));
    uint32_t seed = 1;
    for (const Shape& s : kShapes) {
      INFO("rows=" << s.rows << " k=" << s.k << " n=" << s.n);
      // Strided operands: a and out are windows into wider rows, b has padding columns.
      const int64_t lda = s.k + 3, ldb = s.n + 5, ld_out = s.n + 2;
      const std::vector<float> a = RandomVector(s.rows * lda, seed++);
      const std::vector<float> b = RandomVector(std::max<int64_t>(1, s.k) * ldb, seed++);
      std::vector<float> out(s.rows * ld_out, -7.0f);
      CpuChainGemm(a.data(), lda, s.rows, b.data(), ldb, s.k, s.n, out.data(), ld_out);
      for (int64_t r = 0; r < s.rows; ++r) {
        for (int64_t c = 0; c < s.n; ++c) {
          float want = 0.0f;
          for (int64_t i = 0; i < s.k; ++i) want = std::fma(a[r * lda + i], b[i * ldb + c], want);
          if (std::memcmp(&want, &out[r * ld_out + c], sizeof(float)) != 0) {
            FAIL_CHECK("r=" << r << " c=" << c << " got " << out[r * ld_out + c] << " want "
                            << want);
          }
        }
        for (int64_t c = s.n; c < ld_out; ++c) CHECK(out[r * ld_out + c] == -7.0f);  // untouched
      }
    }
  }
}

}  // namespace
}  // namespace dllm
