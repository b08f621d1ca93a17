// CpuGemm kernels, compiled once per SIMD target by Highway and dispatched at run time.
// The summation order is the one cpu_gemm.h pins; only the register tiling differs by target.

// SSSE3/SSE4 have no FMA: the portable std::fma path (baseline target) covers those CPUs, so
// no kernel is compiled for them.
#ifndef HWY_DISABLED_TARGETS
#define HWY_DISABLED_TARGETS (HWY_SSSE3 | HWY_SSE4)
#endif

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "engine/backend/cpu/cpu_gemm.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

// Per-target helpers: after highway.h, inside the foreach_target pass.
#include "engine/backend/cpu/tile_count-inl.h"

#ifndef DLLM_ENGINE_BACKEND_CPU_CPU_GEMM_SHARED_
#define DLLM_ENGINE_BACKEND_CPU_CPU_GEMM_SHARED_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>

#include "engine/backend/cpu/cpu_gemm.h"

namespace dllm::gemm_detail {

// Lane accumulators per dot product; pinned by the numerics contract, not by the target.
inline constexpr int kLanes = 16;

inline float Bf16ToFloat(uint16_t bits) {
  const uint32_t u = static_cast<uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

template <typename WT>
inline float WeightToFloat(WT w) {
  if constexpr (std::is_same_v<WT, uint16_t>) {
    return Bf16ToFloat(w);
  } else {
    return w;
  }
}

// Folds 16 lane sums in halves (the contract's fixed tree).
inline float FoldLanes(float* lanes) {
  for (int width = kLanes / 2; width >= 1; width /= 2) {
    for (int l = 0; l < width; ++l) lanes[l] += lanes[l + width];
  }
  return lanes[0];
}

// Applies the epilogue to one finished dot product.
inline void StoreOutput(float dot, const float* bias, bool accumulate, int64_t o, float* y) {
  float v = dot;
  if (bias != nullptr) v = v + bias[o];
  if (accumulate) v = *y + v;
  *y = v;
}

// Columns per thread task: about kChunkWeightBytes of weights, so that a chunk stays in L2
// while every row tile sweeps it. Only speed depends on this, never the results.
inline constexpr int64_t kChunkWeightBytes = int64_t{256} << 10;

inline int64_t ChunkColumns(int64_t k, int weight_bytes) {
  const int64_t cols = kChunkWeightBytes / std::max<int64_t>(1, k * weight_bytes);
  return std::max<int64_t>(8, cols / 8 * 8);
}

}  // namespace dllm::gemm_detail

#endif  // DLLM_ENGINE_BACKEND_CPU_CPU_GEMM_SHARED_

HWY_BEFORE_NAMESPACE();
namespace dllm {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using gemm_detail::kLanes;

#if HWY_TARGET == HWY_EMU128 || HWY_TARGET == HWY_SCALAR
// No FMA instruction: one std::fma per lane, the contract's order spelled out.
template <typename WT>
void GemmColumns(const float* x, int64_t rows, const WT* w, int64_t k, const float* bias,
                 bool accumulate, float* y, int64_t n, int64_t col_begin, int64_t col_end) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * k;
    for (int64_t o = col_begin; o < col_end; ++o) {
      const WT* wo = w + o * k;
      float lanes[kLanes] = {};
      const int64_t k_padded = (k + kLanes - 1) / kLanes * kLanes;
      for (int64_t i = 0; i < k_padded; ++i) {
        const float xi = i < k ? xr[i] : 0.0f;
        const float wi = i < k ? gemm_detail::WeightToFloat(wo[i]) : 0.0f;
        lanes[i % kLanes] = std::fma(xi, wi, lanes[i % kLanes]);
      }
      gemm_detail::StoreOutput(gemm_detail::FoldLanes(lanes), bias, accumulate, o, y + r * n + o);
    }
  }
}
#else

using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;
constexpr size_t kVectorLanes = hn::MaxLanes(DF());
static_assert(kLanes % kVectorLanes == 0, "16 lanes must be whole vectors");
// Vectors per 16-lane accumulator: 1 on AVX-512, 2 on AVX2.
constexpr int kVectors = kLanes / static_cast<int>(kVectorLanes);
// Register tile: kTileRows x kTileCols dot products at once, kTileRows*kTileCols*kVectors
// accumulators plus kTileRows x vectors and one weight vector in registers (32 on AVX-512,
// 16 on AVX2).
constexpr int kTileRows = kVectors == 1 ? 6 : 2;
constexpr int kTileCols = kVectors == 1 ? 4 : 3;

HWY_INLINE VF LoadWeight(DF df, const float* p) { return hn::LoadU(df, p); }

HWY_INLINE VF LoadWeight(DF df, const uint16_t* p) {
  const hn::Rebind<uint16_t, DF> du16;
  const hn::RebindToUnsigned<DF> du32;
  return hn::BitCast(df, hn::ShiftLeft<16>(hn::PromoteTo(du32, hn::LoadU(du16, p))));
}

constexpr int HalfUp(int n) { return (n + 1) / 2; }

// Folds kCount 16-lane accumulators into kCount sums with vector shuffles, in exactly the
// contract's tree (lanes l and l + 8, then + 4, + 2, + 1), several accumulators per vector:
//   A: 16 -> 8 lanes. AVX2: the two vectors add. AVX-512: two accumulators share a vector,
//      [lower halves] + [upper halves].
//   B: 8 -> 4. Each 8-lane group is two adjacent 128-bit blocks; even and odd blocks add.
//   C: 4 -> 2 and D: 2 -> 1, inside 128-bit blocks.
// Which lane ends up holding which sum is found by running the same shuffles on lane labels
// (an "add" that keeps its first operand): no hand-derived permutation to get wrong.
template <int kCount, bool kLabels = false>
HWY_INLINE void Fold(VF (&acc)[kCount][kVectors], float* out) {
  const DF df;
  const hn::Repartition<double, DF> d64;
  auto add = [](VF a, VF b) {
    if constexpr (kLabels) {
      return a;
    } else {
      return hn::Add(a, b);
    }
  };
  constexpr int kA = kVectors == 2 ? kCount : HalfUp(kCount);
  VF a[kA];
  if constexpr (kVectors == 2) {
    for (int i = 0; i < kCount; ++i) a[i] = add(acc[i][0], acc[i][1]);
  } else {
    for (int i = 0; i < kA; ++i) {
      const VF lo = acc[2 * i][0];
      const VF hi = 2 * i + 1 < kCount ? acc[2 * i + 1][0] : hn::Set(df, kLabels ? -1.0f : 0.0f);
      a[i] = add(hn::ConcatLowerLower(df, hi, lo), hn::ConcatUpperUpper(df, hi, lo));
    }
  }
  const VF pad = hn::Set(df, kLabels ? -1.0f : 0.0f);
  constexpr int kB = HalfUp(kA);
  VF b[kB];
  for (int i = 0; i < kB; ++i) {
    const VF p = a[2 * i];
    const VF q = 2 * i + 1 < kA ? a[2 * i + 1] : pad;
    b[i] = add(hn::OddEvenBlocks(hn::SwapAdjacentBlocks(q), p),
               hn::OddEvenBlocks(q, hn::SwapAdjacentBlocks(p)));
  }
  constexpr int kC = HalfUp(kB);
  VF c[kC];
  for (int i = 0; i < kC; ++i) {
    const auto p = hn::BitCast(d64, b[2 * i]);
    const auto q = hn::BitCast(d64, 2 * i + 1 < kB ? b[2 * i + 1] : pad);
    c[i] = add(hn::BitCast(df, hn::InterleaveLower(d64, p, q)),
               hn::BitCast(df, hn::InterleaveUpper(d64, p, q)));
  }
  constexpr int kD = HalfUp(kC);
  for (int i = 0; i < kD; ++i) {
    const VF r = c[2 * i];
    const VF s = 2 * i + 1 < kC ? c[2 * i + 1] : pad;
    const VF d = hn::OddEven(add(s, hn::Shuffle2301(s)), add(r, hn::Shuffle2301(r)));
    hn::StoreU(d, df, out + i * static_cast<int64_t>(kVectorLanes));
  }
}

// Output index held by each lane of Fold's result (-1: padding), per kCount.
template <int kCount>
struct FoldLabels {
  static constexpr int kSlots = HalfUp(HalfUp(HalfUp(kVectors == 2 ? kCount : HalfUp(kCount)))) *
                                static_cast<int>(kVectorLanes);
  int label[kSlots];
  FoldLabels() {
    const DF df;
    VF acc[kCount][kVectors];
    for (int i = 0; i < kCount; ++i) {
      for (int v = 0; v < kVectors; ++v) acc[i][v] = hn::Set(df, static_cast<float>(i));
    }
    float out[kSlots];
    Fold<kCount, true>(acc, out);
    for (int j = 0; j < kSlots; ++j) label[j] = static_cast<int>(out[j]);
  }
};

// Where Tile's epilogue puts each lane of Fold's result: output (r, c) of an R x C tile goes to
// r * 4 + c of a row-major [R][4] block, padding lanes to the spare slot R * 4. A plain indexed
// copy then replaces per-lane label decoding, and each row's outputs finish as one 4-wide
// vector (the scalar per-output epilogue was a quarter of a tiny model's GEMM time).
template <int R, int C>
struct TileScatter {
  static_assert(C <= 4, "a tile row must fit one 4-lane vector");
  static constexpr int kSlots = FoldLabels<R * C>::kSlots;
  int dst[kSlots];
  TileScatter() {
    const FoldLabels<R * C> labels;
    for (int j = 0; j < kSlots; ++j) {
      const int i = labels.label[j];
      dst[j] = i < 0 ? R * 4 : (i / C) * 4 + i % C;
    }
  }
};

// The contract's epilogue for an R x C tile whose dot products sit row-major in rows4:
// v = dot (+ bias), then y = y_old + v, 4 lanes per row (C < 4: masked, so nothing past the
// tile is read or written).
template <int R, int C>
HWY_INLINE void FinishRows(const float* rows4, const float* bias, bool accumulate, float* y,
                           int64_t n, int64_t col) {
  const hn::FixedTag<float, 4> d4;
  const auto mask = hn::FirstN(d4, C);
  auto load = [&](const float* p) {
    if constexpr (C == 4) {
      return hn::LoadU(d4, p);
    } else {
      return hn::MaskedLoad(mask, d4, p);
    }
  };
  const auto b = bias != nullptr ? load(bias + col) : hn::Zero(d4);
  for (int r = 0; r < R; ++r) {
    float* yr = y + r * n + col;
    auto v = hn::Load(d4, rows4 + 4 * r);
    if (bias != nullptr) v = hn::Add(v, b);
    if (accumulate) v = hn::Add(load(yr), v);
    if constexpr (C == 4) {
      hn::StoreU(v, d4, yr);
    } else {
      hn::BlendedStore(v, mask, d4, yr);
    }
  }
}

// One 16-lane step of every accumulator: rows x + r * ldx, weight rows w + c * ldw. Strides,
// not pointer arrays, so the addresses stay in registers.
template <int R, int C, typename WT>
HWY_INLINE void Step(const float* HWY_RESTRICT x, int64_t ldx, const WT* HWY_RESTRICT w,
                     int64_t ldw, VF (&acc)[R * C][kVectors]) {
  const DF df;
  for (int v = 0; v < kVectors; ++v) {
    const int64_t off = v * static_cast<int64_t>(kVectorLanes);
    VF xv[R];
    for (int r = 0; r < R; ++r) xv[r] = hn::LoadU(df, x + r * ldx + off);
    for (int c = 0; c < C; ++c) {
      const VF wv = LoadWeight(df, w + c * ldw + off);
      for (int r = 0; r < R; ++r) acc[r * C + c][v] = hn::MulAdd(xv[r], wv, acc[r * C + c][v]);
    }
  }
}

// Dot products of rows x[0..R) with weight rows w[0..C), written through StoreOutput.
template <int R, int C, typename WT>
HWY_INLINE void Tile(const float* x, int64_t k, const WT* w, const float* bias, bool accumulate,
                     float* y, int64_t n, int64_t col) {
  const DF df;
  // The zero goes through an empty asm so that GCC keeps the accumulators in registers: seen
  // as a constant it zeroed the whole array on the stack with `rep stos` in every tile, 10% of
  // a tiny model's GEMM time (k = 128: a tile is only 8 steps).
  VF zero = hn::Zero(df);
#if HWY_ARCH_X86 && (HWY_COMPILER_GCC || HWY_COMPILER_CLANG)
  asm("" : "+v"(zero.raw));
#endif
  VF acc[R * C][kVectors];
  for (int i = 0; i < R * C; ++i) {
    for (int v = 0; v < kVectors; ++v) acc[i][v] = zero;
  }
  // x is this row tile's packed block (PackRows): step s of row r at x + (s * R + r) * 16.
  const int64_t k_main = k / kLanes;
  for (int64_t st = 0; st < k_main; ++st) {
    Step<R, C>(x + st * R * kLanes, kLanes, w + st * kLanes, k, acc);
  }
  if (k_main * kLanes < k) {
    // The contract zero-pads k to whole 16-lane steps: the tail runs as one more step (the
    // packed x is already padded).
    HWY_ALIGN WT w_tail[C][kLanes] = {};
    const int64_t tail = k - k_main * kLanes;
    for (int c = 0; c < C; ++c)
      std::memcpy(w_tail[c], w + c * k + k_main * kLanes, sizeof(WT) * tail);
    Step<R, C>(x + k_main * R * kLanes, kLanes, &w_tail[0][0], kLanes, acc);
  }
  static const TileScatter<R, C> scatter;
  HWY_ALIGN float sums[TileScatter<R, C>::kSlots];
  Fold<R * C>(acc, sums);
  HWY_ALIGN float rows4[R * 4 + 4];
  for (int j = 0; j < TileScatter<R, C>::kSlots; ++j) rows4[scatter.dst[j]] = sums[j];
  FinishRows<R, C>(rows4, bias, accumulate, y, n, col);
}

template <int R, typename WT>
HWY_INLINE void RowTile(const float* x, int64_t k, const WT* w, const float* bias, bool accumulate,
                        float* y, int64_t n, int64_t col_begin, int64_t col_end) {
  int64_t col = col_begin;
  for (; col + kTileCols <= col_end; col += kTileCols) {
    Tile<R, kTileCols>(x, k, w + col * k, bias, accumulate, y, n, col);
  }
  // Column tail: one narrower tile.
  WithTailCount<kTileCols>(col_end - col, [&](auto c) {
    Tile<R, decltype(c)::value>(x, k, w + col * k, bias, accumulate, y, n, col);
  });
}

// x: the rows packed by PackRows for kTileRows.
template <typename WT>
void GemmColumns(const float* x, int64_t rows, const WT* w, int64_t k, const float* bias,
                 bool accumulate, float* y, int64_t n, int64_t col_begin, int64_t col_end) {
  const int64_t tile_floats = kTileRows * ((k + kLanes - 1) / kLanes) * kLanes;
  int64_t r = 0;
  for (; r + kTileRows <= rows; r += kTileRows) {
    RowTile<kTileRows>(x + r / kTileRows * tile_floats, k, w, bias, accumulate, y + r * n, n,
                       col_begin, col_end);
  }
  // Row tail: one shorter tile.
  const float* xr = x + r / kTileRows * tile_floats;
  float* yr = y + r * n;
  WithTailCount<kTileRows>(rows - r, [&](auto rt) {
    RowTile<decltype(rt)::value>(xr, k, w, bias, accumulate, yr, n, col_begin, col_end);
  });
}
#endif

// Type-erased entry point for dynamic dispatch.
void GemmColumnsAny(const float* x, int64_t rows, const void* w, bool bf16, int64_t k,
                    const float* bias, bool accumulate, float* y, int64_t n, int64_t col_begin,
                    int64_t col_end) {
  if (bf16) {
    GemmColumns(x, rows, static_cast<const uint16_t*>(w), k, bias, accumulate, y, n, col_begin,
                col_end);
  } else {
    GemmColumns(x, rows, static_cast<const float*>(w), k, bias, accumulate, y, n, col_begin,
                col_end);
  }
}

int64_t CurrentTarget() { return HWY_TARGET; }

// Rows per packed x tile (0: the target reads x unpacked).
int TileRows() {
#if HWY_TARGET == HWY_EMU128 || HWY_TARGET == HWY_SCALAR
  return 0;
#else
  return kTileRows;
#endif
}

}  // namespace HWY_NAMESPACE
}  // namespace dllm
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace dllm {

HWY_EXPORT(GemmColumnsAny);
HWY_EXPORT(CurrentTarget);
HWY_EXPORT(TileRows);

namespace {

// Packs x [rows, k] for tiles of `tile_rows` rows: tile t (rows t*R .. t*R + Rt - 1) starts at
// t * R * steps * 16 and holds, for each 16-lane step s, its Rt rows' 16 values side by side
// (zero past k). The kernel then reads one tile through a single pointer.
const float* PackRows(const float* x, int64_t rows, int64_t k, int tile_rows,
                      std::vector<float>* scratch) {
  const int64_t steps = (k + gemm_detail::kLanes - 1) / gemm_detail::kLanes;
  const int64_t lanes = gemm_detail::kLanes;
  const int64_t tiles = (rows + tile_rows - 1) / tile_rows;
  // The kernel loads whole 64-byte vectors of the packed block: starting it on a cache line
  // keeps every load inside one line. A line-splitting load costs two L1 accesses, and with
  // std::vector's 16-byte alignment every packed x load split: it halved the kernel's rate.
  constexpr int64_t kLineFloats = 64 / sizeof(float);
  scratch->resize(static_cast<size_t>(tiles * tile_rows * steps * lanes + kLineFloats));
  const auto misalign = reinterpret_cast<uintptr_t>(scratch->data()) % 64;
  float* out = scratch->data() + (misalign == 0 ? 0 : (64 - misalign) / sizeof(float));
  for (int64_t t = 0; t < tiles; ++t) {
    const int64_t r0 = t * tile_rows;
    const int64_t rt = std::min<int64_t>(tile_rows, rows - r0);
    float* tile = out + t * tile_rows * steps * lanes;
    for (int64_t r = 0; r < rt; ++r) {
      const float* xr = x + (r0 + r) * k;
      for (int64_t st = 0; st < steps; ++st) {
        const int64_t count = std::min(lanes, k - st * lanes);
        float* dst = tile + (st * rt + r) * lanes;
        std::memcpy(dst, xr + st * lanes, sizeof(float) * count);
        std::fill(dst + count, dst + lanes, 0.0f);
      }
    }
  }
  return out;
}

}  // namespace

void CpuGemm(const float* x, int64_t rows, const GemmWeight& w, const float* bias, bool accumulate,
             float* y, ThreadPool* pool, std::vector<float>* scratch) {
  if (rows <= 0 || w.n <= 0) return;
  // The target is read once per call, so packing and kernels agree even if a test switches it.
  const int tile_rows = HWY_DYNAMIC_DISPATCH(TileRows)();
  if (tile_rows > 0) x = PackRows(x, rows, w.k, tile_rows, scratch);
  const bool bf16 = w.type == GemmWeightType::kBF16;
  const int64_t chunk = gemm_detail::ChunkColumns(w.k, bf16 ? 2 : 4);
  const int64_t chunks = (w.n + chunk - 1) / chunk;
  auto run = [&](int64_t c) {
    HWY_DYNAMIC_DISPATCH(GemmColumnsAny)
    (x, rows, w.data, bf16, w.k, bias, accumulate, y, w.n, c * chunk,
     std::min(w.n, (c + 1) * chunk));
  };
  if (pool == nullptr || chunks == 1) {
    for (int64_t c = 0; c < chunks; ++c) run(c);
    return;
  }
  pool->ParallelFor(chunks, run);
}

std::string CpuGemmTargetName() { return hwy::TargetName(HWY_DYNAMIC_DISPATCH(CurrentTarget)()); }

std::vector<int64_t> CpuGemmSupportedTargets() { return hwy::SupportedAndGeneratedTargets(); }

}  // namespace dllm
#endif  // HWY_ONCE
