// Helpers shared by the CPU kernel tests that force SIMD targets.
#ifndef DLLM_TESTS_ENGINE_BACKEND_SIMD_TEST_UTIL_H_
#define DLLM_TESTS_ENGINE_BACKEND_SIMD_TEST_UTIL_H_

#include <cstdint>
#include <random>
#include <vector>

#include "hwy/targets.h"

namespace dllm::test {

// n seeded draws from N(0, scale^2).
inline std::vector<float> RandomVector(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = d(gen);
  return v;
}

// Restores the real CPU's targets when a test that forces one (SetSupportedTargetsForTest) ends.
struct TargetGuard {
  ~TargetGuard() { hwy::SetSupportedTargetsForTest(0); }
};

}  // namespace dllm::test

#endif  // DLLM_TESTS_ENGINE_BACKEND_SIMD_TEST_UTIL_H_
