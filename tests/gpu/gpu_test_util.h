// Small helpers shared by the GPU test executable and the GPU benchmark.
#ifndef DLLM_TESTS_GPU_GPU_TEST_UTIL_H_
#define DLLM_TESTS_GPU_GPU_TEST_UTIL_H_

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace dllm {
namespace gpu_test {

// PASS/FAIL lines and a failure count; a test never stops the run.
class Report {
 public:
  void Check(bool ok, const std::string& what) {
    std::printf("%s  %s\n", ok ? "PASS" : "FAIL", what.c_str());
    std::fflush(stdout);
    if (!ok) ++failures_;
    ++checks_;
  }
  void Status(const absl::Status& st, const std::string& what) {
    Check(st.ok(), st.ok() ? what : what + ": " + std::string(st.message()));
  }
  int failures() const { return failures_; }
  int checks() const { return checks_; }

 private:
  int failures_ = 0;
  int checks_ = 0;
};

// ||a - b|| / ||b|| over all elements (0 when both are zero).
inline double RelErr(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  const size_t n = a.size() < b.size() ? a.size() : b.size();
  for (size_t i = 0; i < n; ++i) {
    const double d = static_cast<double>(a[i]) - b[i];
    num += d * d;
    den += static_cast<double>(b[i]) * b[i];
  }
  if (a.size() != b.size()) return INFINITY;
  if (den == 0) return num == 0 ? 0 : INFINITY;
  return std::sqrt(num / den);
}

inline int ArgMax(const float* row, int n) {
  int best = 0;
  for (int i = 1; i < n; ++i) {
    if (row[i] > row[best]) best = i;
  }
  return best;
}

}  // namespace gpu_test
}  // namespace dllm

#endif  // DLLM_TESTS_GPU_GPU_TEST_UTIL_H_
