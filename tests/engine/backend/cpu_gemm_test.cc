#include "engine/backend/cpu/cpu_gemm.h"

#include <catch2/catch.hpp>
#include <cstring>
#include <random>
#include <vector>

namespace dllm {
namespace {

std::vector<float> RandomVector(size_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> d;
  std::vector<float> v(n);
  for (float& x : v) x = d(gen);
  return v;
}

// Each row of a GEMM must come out bit-identical whatever the other rows are, how many there
// are, and where the row sits in the call: this is what batch invariance rests on.
void CheckRowInvariance(int64_t k, int64_t n, bool accumulate) {
  const int64_t max_rows = 70;
  const std::vector<float> w = RandomVector(n * k, 1);
  const std::vector<float> x = RandomVector(max_rows * k, 2);
  const std::vector<float> y0 = RandomVector(max_rows * n, 3);
  std::vector<float> scratch;
  // Reference: every row alone.
  std::vector<float> alone(max_rows * n);
  for (int64_t r = 0; r < max_rows; ++r) {
    std::memcpy(&alone[r * n], &y0[r * n], sizeof(float) * n);
    CpuGemm(&x[r * k], 1, k, w.data(), n, accumulate, &alone[r * n], &scratch);
  }
  for (int64_t rows : {2, 3, 5, 16, 33, 64, 70}) {
    for (int64_t offset : {int64_t{0}, int64_t{1}, max_rows - rows}) {
      if (offset + rows > max_rows || offset < 0) continue;
      std::vector<float> y(y0.begin() + offset * n, y0.begin() + (offset + rows) * n);
      CpuGemm(&x[offset * k], rows, k, w.data(), n, accumulate, y.data(), &scratch);
      INFO("k=" << k << " n=" << n << " rows=" << rows << " offset=" << offset);
      CHECK(std::memcmp(y.data(), &alone[offset * n], sizeof(float) * rows * n) == 0);
    }
  }
  // Accuracy against a double-precision reference.
  double max_err = 0, max_ref = 0;
  for (int64_t r = 0; r < max_rows; r += 7) {
    for (int64_t o = 0; o < n; ++o) {
      double ref = accumulate ? y0[r * n + o] : 0.0;
      for (int64_t i = 0; i < k; ++i) ref += static_cast<double>(x[r * k + i]) * w[o * k + i];
      max_err = std::max(max_err, std::abs(ref - alone[r * n + o]));
      max_ref = std::max(max_ref, std::abs(ref));
    }
  }
  CHECK(max_err <= 1e-5 * max_ref);
}

TEST_CASE("cpu_gemm: small weights (plain loop) are row-invariant") {
  CheckRowInvariance(32, 64, false);
  CheckRowInvariance(64, 96, true);
  CheckRowInvariance(13, 7, false);
  CheckRowInvariance(128, 128, true);  // exactly at the threshold
}

TEST_CASE("cpu_gemm: OpenBLAS weights are row-invariant") {
  CHECK(CpuGemmMinRows(512, 256) > 1);
  // Every padded call stays above OpenBLAS's small-kernel bound (rows*n*k <= 100^3).
  CHECK(CpuGemmMinRows(160, 128) * 160 * 128 > 1000000);
  CHECK(CpuGemmMinRows(512, 256) * 512 * 256 > 1000000);
  CheckRowInvariance(128, 160, false);  // just above the threshold: padded to 52 rows
  CheckRowInvariance(256, 512, false);  // rows 1-2 hit OpenBLAS's small kernel unpadded
  CheckRowInvariance(256, 512, true);
  CheckRowInvariance(384, 1000, false);
  CheckRowInvariance(1024, 700, true);
}

}  // namespace
}  // namespace dllm
