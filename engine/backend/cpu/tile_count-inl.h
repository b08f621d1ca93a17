// WithTailCount: turns a run-time tile remainder into a compile-time one, for the Highway
// kernels (cpu_gemm.cc, cpu_chain_gemm.cc). Per-target header (Highway's -inl.h pattern):
// included after hwy/highway.h, once per compiled target.

// Per-target include guard: toggled by foreach_target.
#if defined(DLLM_ENGINE_BACKEND_CPU_TILE_COUNT_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef DLLM_ENGINE_BACKEND_CPU_TILE_COUNT_INL_H_
#undef DLLM_ENGINE_BACKEND_CPU_TILE_COUNT_INL_H_
#else
#define DLLM_ENGINE_BACKEND_CPU_TILE_COUNT_INL_H_
#endif

#include <cstdint>
#include <type_traits>
#include <utility>

#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace dllm {
namespace HWY_NAMESPACE {

// Calls fn(std::integral_constant<int, N>) for N == count, 0 < count < kLimit; does nothing
// otherwise.
template <int kLimit, typename Fn>
HWY_INLINE void WithTailCount(int64_t count, Fn&& fn) {
  [&]<int... N>(std::integer_sequence<int, N...>) {
    ((count == N + 1 ? (fn(std::integral_constant<int, N + 1>{}), 0) : 0), ...);
  }
  (std::make_integer_sequence<int, kLimit - 1>{});
}

}  // namespace HWY_NAMESPACE
}  // namespace dllm
HWY_AFTER_NAMESPACE();

#endif  // per-target include guard
