// Catch2 main for the engine suite. DLLM_TEST_SIMD_TARGET=<Highway target name> (e.g. AVX3,
// AVX2, SCALAR) forces the CPU kernels onto that target for the whole run, so ctest can run
// the numerics tests once per target (tests/CMakeLists.txt). A target this CPU cannot run
// exits with 77, which ctest reports as skipped.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "engine/backend/cpu/cpu_gemm.h"
#include "hwy/targets.h"

int main(int argc, char** argv) {
  if (const char* want = std::getenv("DLLM_TEST_SIMD_TARGET"); want != nullptr && *want != 0) {
    bool found = false;
    for (int64_t target : dllm::CpuGemmSupportedTargets()) {
      if (std::string(hwy::TargetName(target)) == want) {
        hwy::SetSupportedTargetsForTest(target);
        found = true;
      }
    }
    if (!found) {
      std::printf("SIMD target %s is not supported on this CPU: skipped\n", want);
      return 77;
    }
    std::printf("SIMD target forced: %s\n", dllm::CpuGemmTargetName().c_str());
  }
  return Catch::Session().run(argc, argv);
}
