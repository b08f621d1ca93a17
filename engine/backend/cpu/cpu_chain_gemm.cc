// CpuChainGemm kernels, compiled once per SIMD target by Highway and dispatched at run time.
// Only the register tiling differs by target; every lane runs the contract's fma chain.

#ifndef HWY_DISABLED_TARGETS
#define HWY_DISABLED_TARGETS (HWY_SSSE3 | HWY_SSE4)
#endif

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "engine/backend/cpu/cpu_chain_gemm.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

// Per-target helpers: after highway.h, inside the foreach_target pass.
#include "engine/backend/cpu/tile_count-inl.h"

#ifndef DLLM_ENGINE_BACKEND_CPU_CPU_CHAIN_GEMM_SHARED_
#define DLLM_ENGINE_BACKEND_CPU_CPU_CHAIN_GEMM_SHARED_

#include <cmath>
#include <cstdint>
#include <utility>

#include "engine/backend/cpu/cpu_chain_gemm.h"

namespace dllm::chain_detail {

// The contract written out; also the path for columns past the last whole vector.
inline void ScalarColumns(const float* a, int64_t lda, int64_t rows, const float* b, int64_t ldb,
                          int64_t k, int64_t col_begin, int64_t col_end, float* out,
                          int64_t ld_out) {
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = col_begin; c < col_end; ++c) {
      float acc = 0.0f;
      for (int64_t i = 0; i < k; ++i) acc = std::fma(a[r * lda + i], b[i * ldb + c], acc);
      out[r * ld_out + c] = acc;
    }
  }
}

}  // namespace dllm::chain_detail

#endif  // DLLM_ENGINE_BACKEND_CPU_CPU_CHAIN_GEMM_SHARED_

HWY_BEFORE_NAMESPACE();
namespace dllm {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

#if HWY_TARGET == HWY_EMU128 || HWY_TARGET == HWY_SCALAR
void ChainGemm(const float* a, int64_t lda, int64_t rows, const float* b, int64_t ldb, int64_t k,
               int64_t n, float* out, int64_t ld_out) {
  chain_detail::ScalarColumns(a, lda, rows, b, ldb, k, 0, n, out, ld_out);
}
#else

using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;
constexpr int64_t kVL = static_cast<int64_t>(hn::MaxLanes(DF()));
// Register tile: kRows x kCols vectors of accumulators, plus kCols b vectors and one
// broadcast (32 registers on AVX-512, 16 on AVX2).
constexpr int kRows = kVL >= 16 ? 6 : 4;
constexpr int kCols = kVL >= 16 ? 4 : 3;

template <int R, int C>
HWY_INLINE void Tile(const float* HWY_RESTRICT a, int64_t lda, const float* HWY_RESTRICT b,
                     int64_t ldb, int64_t k, float* out, int64_t ld_out) {
  const DF df;
  VF acc[R][C];
  for (int r = 0; r < R; ++r) {
    for (int c = 0; c < C; ++c) acc[r][c] = hn::Zero(df);
  }
  for (int64_t i = 0; i < k; ++i) {
    VF bv[C];
    for (int c = 0; c < C; ++c) bv[c] = hn::LoadU(df, b + i * ldb + c * kVL);
    for (int r = 0; r < R; ++r) {
      const VF av = hn::Set(df, a[r * lda + i]);
      for (int c = 0; c < C; ++c) acc[r][c] = hn::MulAdd(av, bv[c], acc[r][c]);
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int c = 0; c < C; ++c) hn::StoreU(acc[r][c], df, out + r * ld_out + c * kVL);
  }
}

template <int R>
HWY_INLINE void RowTile(const float* a, int64_t lda, const float* b, int64_t ldb, int64_t k,
                        int64_t n, float* out, int64_t ld_out) {
  int64_t col = 0;
  for (; col + kCols * kVL <= n; col += kCols * kVL) {
    Tile<R, kCols>(a, lda, b + col, ldb, k, out + col, ld_out);
  }
  WithTailCount<kCols>((n - col) / kVL, [&](auto c) {
    Tile<R, decltype(c)::value>(a, lda, b + col, ldb, k, out + col, ld_out);
    col += decltype(c)::value * kVL;
  });
  if (col < n) chain_detail::ScalarColumns(a, lda, R, b, ldb, k, col, n, out, ld_out);
}

void ChainGemm(const float* a, int64_t lda, int64_t rows, const float* b, int64_t ldb, int64_t k,
               int64_t n, float* out, int64_t ld_out) {
  int64_t r = 0;
  for (; r + kRows <= rows; r += kRows) {
    RowTile<kRows>(a + r * lda, lda, b, ldb, k, n, out + r * ld_out, ld_out);
  }
  WithTailCount<kRows>(rows - r, [&](auto rt) {
    RowTile<decltype(rt)::value>(a + r * lda, lda, b, ldb, k, n, out + r * ld_out, ld_out);
  });
}
#endif

}  // namespace HWY_NAMESPACE
}  // namespace dllm
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace dllm {

HWY_EXPORT(ChainGemm);

void CpuChainGemm(const float* a, int64_t lda, int64_t rows, const float* b, int64_t ldb, int64_t k,
                  int64_t n, float* out, int64_t ld_out) {
  if (rows <= 0 || n <= 0) return;
  HWY_DYNAMIC_DISPATCH(ChainGemm)(a, lda, rows, b, ldb, k, n, out, ld_out);
}

}  // namespace dllm
#endif  // HWY_ONCE
