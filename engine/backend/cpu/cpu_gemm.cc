// CpuGemm kernels, compiled once per SIMD target by Highway and dispatched at run time.
// Every target runs the contract's sequential fma chain per output (cpu_gemm.h); only the
// register tiling and the cache blocking differ, and neither changes a bit.

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

#include "engine/backend/cpu/cpu_gemm.h"

namespace dllm::gemm_detail {

inline float Bf16ToFloat(uint16_t bits) {
  const uint32_t u = static_cast<uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

template <typename WT>
inline float ToFloat(WT w) {
  if constexpr (std::is_same_v<WT, uint16_t>) {
    return Bf16ToFloat(w);
  } else {
    return w;
  }
}

// Cache blocking (speed only, never results): a thread task owns kTaskPanels panels (128
// outputs) and walks k in blocks of kBlockK; between blocks each output's partial chain is
// parked in fp32 memory and resumed. Measured on the mid model (1 thread, AVX-512): blocks
// small enough to keep a task's weights in L1 (k = 128) ran a full step at 65% of sgemm,
// unblocked k at 76-78%. 2048 keeps the mid model's k (1024, 2816) in one or two blocks and
// bounds a task's working set for 8B shapes (k = 4096 and 12288: 2 and 6 blocks).
inline constexpr int64_t kTaskPanels = 8;
inline constexpr int64_t kBlockK = 2048;

inline int64_t Panels(int64_t n) { return (n + kGemmPanel - 1) / kGemmPanel; }

// Arguments of one task: outputs for panels [panel_begin, panel_end) of every row.
struct TaskArgs {
  const float* x;
  int64_t rows, k, n;
  const float* bias;
  bool accumulate;
  float* y;
  float* park;  // partial chains between k blocks: y itself, or scratch when accumulating
  int64_t panel_begin, panel_end;
};

// The epilogue for one output.
inline float Finish(float acc, const float* bias, bool accumulate, int64_t o, const float* y) {
  float v = acc;
  if (bias != nullptr) v = v + bias[o];
  if (accumulate) v = *y + v;
  return v;
}

}  // namespace dllm::gemm_detail

#endif  // DLLM_ENGINE_BACKEND_CPU_CPU_GEMM_SHARED_

HWY_BEFORE_NAMESPACE();
namespace dllm {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using gemm_detail::TaskArgs;

#if HWY_TARGET == HWY_EMU128 || HWY_TARGET == HWY_SCALAR
// No FMA instruction: one std::fma per step, the contract spelled out.
template <typename WT>
void GemmTask(const TaskArgs& a, const WT* w) {
  const int64_t col_end = std::min(a.n, a.panel_end * kGemmPanel);
  for (int64_t r = 0; r < a.rows; ++r) {
    for (int64_t o = a.panel_begin * kGemmPanel; o < col_end; ++o) {
      const WT* wp = w + (o / kGemmPanel) * a.k * kGemmPanel + o % kGemmPanel;
      float acc = 0.0f;
      for (int64_t i = 0; i < a.k; ++i) {
        acc = std::fma(a.x[r * a.k + i], gemm_detail::ToFloat(wp[i * kGemmPanel]), acc);
      }
      a.y[r * a.n + o] = gemm_detail::Finish(acc, a.bias, a.accumulate, o, a.y + r * a.n + o);
    }
  }
}
#else

using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;
constexpr int64_t kVL = static_cast<int64_t>(hn::MaxLanes(DF()));
static_assert(kGemmPanel % kVL == 0, "a panel must be whole vectors");
// Vectors per panel: 1 on AVX-512, 2 on AVX2.
constexpr int kPanelVectors = static_cast<int>(kGemmPanel / kVL);
// Register tile: kTileRows rows x kTilePanels panels of accumulators, plus one weight vector
// per panel column and one broadcast x (29 of 32 registers on AVX-512, 15 of 16 on AVX2).
constexpr int kTileRows = 6;
constexpr int kTilePanels = kPanelVectors == 1 ? 4 : 1;

HWY_INLINE VF LoadWeight(DF df, const float* p) { return hn::LoadU(df, p); }

HWY_INLINE VF LoadWeight(DF df, const uint16_t* p) {
  const hn::Rebind<uint16_t, DF> du16;
  const hn::RebindToUnsigned<DF> du32;
  return hn::BitCast(df, hn::ShiftLeft<16>(hn::PromoteTo(du32, hn::LoadU(du16, p))));
}

// R rows x P panels, k values [k0, k0 + steps). `w` points at panel 0 of the tile at k0;
// consecutive panels are `panel_stride` elements apart. `cols` outputs of the tile exist
// (< P * 16 only for the last panel of the matrix): loads and stores of y, park and bias
// are masked to them.
template <int R, int P, typename WT>
HWY_INLINE void Tile(const TaskArgs& a, const WT* HWY_RESTRICT w, int64_t panel_stride, int64_t row,
                     int64_t col, int64_t cols, int64_t k0, int64_t steps, bool resume,
                     bool finish) {
  constexpr int V = P * kPanelVectors;
  const DF df;
  auto lanes = [&](int v) { return std::clamp<int64_t>(cols - v * kVL, 0, kVL); };
  auto load = [&](const float* p, int v) {
    return lanes(v) == kVL ? hn::LoadU(df, p) : hn::MaskedLoad(hn::FirstN(df, lanes(v)), df, p);
  };
  auto store = [&](VF value, float* p, int v) {
    if (lanes(v) == kVL) {
      hn::StoreU(value, df, p);
    } else {
      hn::BlendedStore(value, hn::FirstN(df, lanes(v)), df, p);
    }
  };
  // The zero goes through an empty asm so that GCC keeps the accumulators in registers
  // instead of zeroing a stack array with `rep stos` per tile.
  VF zero = hn::Zero(df);
#if HWY_ARCH_X86 && (HWY_COMPILER_GCC || HWY_COMPILER_CLANG)
  asm("" : "+v"(zero.raw));
#endif
  VF acc[R][V];
  for (int r = 0; r < R; ++r) {
    for (int v = 0; v < V; ++v) {
      acc[r][v] = resume ? load(a.park + (row + r) * a.n + col + v * kVL, v) : zero;
    }
  }
  const float* x = a.x + row * a.k + k0;
  for (int64_t i = 0; i < steps; ++i) {
    VF wv[V];
    for (int p = 0; p < P; ++p) {
      for (int q = 0; q < kPanelVectors; ++q) {
        wv[p * kPanelVectors + q] = LoadWeight(df, w + p * panel_stride + i * kGemmPanel + q * kVL);
      }
    }
    for (int r = 0; r < R; ++r) {
      const VF xv = hn::Set(df, x[r * a.k + i]);
      for (int v = 0; v < V; ++v) acc[r][v] = hn::MulAdd(xv, wv[v], acc[r][v]);
    }
  }
  if (!finish) {
    for (int r = 0; r < R; ++r) {
      for (int v = 0; v < V; ++v) store(acc[r][v], a.park + (row + r) * a.n + col + v * kVL, v);
    }
    return;
  }
  VF b[V];
  for (int v = 0; v < V; ++v) b[v] = a.bias != nullptr ? load(a.bias + col + v * kVL, v) : zero;
  for (int r = 0; r < R; ++r) {
    float* yr = a.y + (row + r) * a.n + col;
    for (int v = 0; v < V; ++v) {
      VF out = acc[r][v];
      if (a.bias != nullptr) out = hn::Add(out, b[v]);
      if (a.accumulate) out = hn::Add(load(yr + v * kVL, v), out);
      store(out, yr + v * kVL, v);
    }
  }
}

template <int R, typename WT>
HWY_INLINE void RowTile(const TaskArgs& a, const WT* w, int64_t row, int64_t k0, int64_t steps,
                        bool resume, bool finish) {
  const int64_t panel_stride = a.k * kGemmPanel;
  auto tile = [&](auto panels, int64_t p) {
    constexpr int P = decltype(panels)::value;
    const int64_t col = p * kGemmPanel;
    const int64_t cols = std::min<int64_t>(P * kGemmPanel, a.n - col);
    Tile<R, P>(a, w + p * panel_stride + k0 * kGemmPanel, panel_stride, row, col, cols, k0, steps,
               resume, finish);
  };
  int64_t p = a.panel_begin;
  for (; p + kTilePanels <= a.panel_end; p += kTilePanels) {
    tile(std::integral_constant<int, kTilePanels>(), p);
  }
  WithTailCount<kTilePanels>(a.panel_end - p, [&](auto panels) { tile(panels, p); });
}

template <typename WT>
void GemmTask(const TaskArgs& a, const WT* w) {
  for (int64_t k0 = 0;; k0 += gemm_detail::kBlockK) {
    const int64_t steps = std::min(gemm_detail::kBlockK, a.k - k0);
    const bool resume = k0 > 0, finish = k0 + steps >= a.k;
    int64_t r = 0;
    for (; r + kTileRows <= a.rows; r += kTileRows) {
      RowTile<kTileRows>(a, w, r, k0, steps, resume, finish);
    }
    WithTailCount<kTileRows>(a.rows - r, [&](auto rt) {
      RowTile<decltype(rt)::value>(a, w, r, k0, steps, resume, finish);
    });
    if (finish) return;
  }
}
#endif

// Type-erased entry point for dynamic dispatch.
void GemmTaskAny(const TaskArgs& a, const void* w, bool bf16) {
  if (bf16) {
    GemmTask(a, static_cast<const uint16_t*>(w));
  } else {
    GemmTask(a, static_cast<const float*>(w));
  }
}

int64_t CurrentTarget() { return HWY_TARGET; }

}  // namespace HWY_NAMESPACE
}  // namespace dllm
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace dllm {

HWY_EXPORT(GemmTaskAny);
HWY_EXPORT(CurrentTarget);

namespace {

// `src` may be unaligned (a tensor inside a mapped safetensors file): read with memcpy.
template <typename WT>
void PackAs(const void* src, int64_t n, int64_t k, WT* dst) {
  const auto* bytes = static_cast<const unsigned char*>(src);
  const int64_t panels = gemm_detail::Panels(n);
  for (int64_t p = 0; p < panels; ++p) {
    WT* panel = dst + p * k * kGemmPanel;
    for (int64_t j = 0; j < kGemmPanel; ++j) {
      const int64_t o = p * kGemmPanel + j;
      if (o < n) {
        const unsigned char* row = bytes + o * k * static_cast<int64_t>(sizeof(WT));
        for (int64_t i = 0; i < k; ++i)
          std::memcpy(&panel[i * kGemmPanel + j], row + i * sizeof(WT), sizeof(WT));
      } else {
        for (int64_t i = 0; i < k; ++i) panel[i * kGemmPanel + j] = WT{0};
      }
    }
  }
}

}  // namespace

int64_t PackedGemmWeightBytes(GemmWeightType type, int64_t n, int64_t k) {
  return gemm_detail::Panels(n) * kGemmPanel * k * (type == GemmWeightType::kBF16 ? 2 : 4);
}

void PackGemmWeight(const void* row_major, GemmWeightType type, int64_t n, int64_t k,
                    void* packed) {
  if (type == GemmWeightType::kBF16) {
    PackAs(row_major, n, k, static_cast<uint16_t*>(packed));
  } else {
    PackAs(row_major, n, k, static_cast<float*>(packed));
  }
}

float PackedGemmWeightAt(const GemmWeight& w, int64_t o, int64_t i) {
  const int64_t index = ((o / kGemmPanel) * w.k + i) * kGemmPanel + o % kGemmPanel;
  if (w.type == GemmWeightType::kBF16) {
    return gemm_detail::Bf16ToFloat(static_cast<const uint16_t*>(w.data)[index]);
  }
  return static_cast<const float*>(w.data)[index];
}

void CpuGemm(const float* x, int64_t rows, const GemmWeight& w, const float* bias, bool accumulate,
             float* y, ThreadPool* pool, std::vector<float>* scratch) {
  if (rows <= 0 || w.n <= 0) return;
  // Partial chains park in y unless y's old contents are still needed (accumulate).
  float* park = y;
  if (accumulate && w.k > gemm_detail::kBlockK) {
    scratch->resize(static_cast<size_t>(rows * w.n));
    park = scratch->data();
  }
  const bool bf16 = w.type == GemmWeightType::kBF16;
  const int64_t panels = gemm_detail::Panels(w.n);
  const int64_t tasks = (panels + gemm_detail::kTaskPanels - 1) / gemm_detail::kTaskPanels;
  auto run = [&](int64_t t) {
    const gemm_detail::TaskArgs args{x,
                                     rows,
                                     w.k,
                                     w.n,
                                     bias,
                                     accumulate,
                                     y,
                                     park,
                                     t * gemm_detail::kTaskPanels,
                                     std::min(panels, (t + 1) * gemm_detail::kTaskPanels)};
    HWY_DYNAMIC_DISPATCH(GemmTaskAny)(args, w.data, bf16);
  };
  if (pool == nullptr || tasks == 1) {
    for (int64_t t = 0; t < tasks; ++t) run(t);
    return;
  }
  pool->ParallelFor(tasks, run);
}

std::string CpuGemmTargetName() { return hwy::TargetName(HWY_DYNAMIC_DISPATCH(CurrentTarget)()); }

std::vector<int64_t> CpuGemmSupportedTargets() { return hwy::SupportedAndGeneratedTargets(); }

}  // namespace dllm
#endif  // HWY_ONCE
