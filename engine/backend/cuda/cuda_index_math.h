// Index math and selection logic of the CUDA kernels, as DLLM_HD functions.
//
// The CUDA backend's kernels only move memory and launch threads; the arithmetic that decides
// *which* element goes where (slab offsets, attention tiles, the radix selection behind top-k /
// top-p sampling) lives here so that host unit tests (tests/engine/backend/
// cuda_index_math_test.cc) exercise exactly the code the device runs. No CUDA headers: this
// file compiles with g++ as plain C++.
#ifndef DLLM_ENGINE_BACKEND_CUDA_CUDA_INDEX_MATH_H_
#define DLLM_ENGINE_BACKEND_CUDA_CUDA_INDEX_MATH_H_

#include <cstdint>

#include "engine/backend/counter_rng.h"
#include "engine/backend/device_inline.h"
#include "engine/backend/kernel_math.h"

namespace dllm {
namespace cuda_index {

// ---- KV slab -----------------------------------------------------------------------------

// Element offset of (layer, plane, position) in a slab laid out as
// [layers][2 (K, V)][capacity_positions][kv_width] (the KvPool contract).
DLLM_HD inline int64_t SlabRowOffset(int layer, int plane, int position, int capacity_positions,
                                     int kv_width) {
  return ((static_cast<int64_t>(layer) * 2 + plane) * capacity_positions + position) *
         static_cast<int64_t>(kv_width);
}

// Elements a slab of `capacity_positions` positions holds.
DLLM_HD inline int64_t SlabElements(int num_layers, int capacity_positions, int kv_width) {
  return static_cast<int64_t>(num_layers) * 2 * capacity_positions * kv_width;
}

// ---- Fused attention probabilities (SeqDesc::scores) ------------------------------------

// A sequence's scores area: [heads][rows][kv_positions] scaled scores, then [heads][rows]
// (max, sum) pairs of each row's softmax. The attention kernels write it; the normalizing
// kernel reads it.
DLLM_HD inline int64_t ScoresFloats(int num_heads, int rows, int kv_positions) {
  return static_cast<int64_t>(num_heads) * rows * kv_positions +
         2 * static_cast<int64_t>(num_heads) * rows;
}
// Where the score of (head, row r, position n) goes.
DLLM_HD inline int64_t ScoreIndex(int head, int r, int n, int rows, int kv_positions) {
  return (static_cast<int64_t>(head) * rows + r) * kv_positions + n;
}
// Where the (max, sum) pair of (head, row r) starts.
DLLM_HD inline int64_t ScoreStatsIndex(int head, int r, int num_heads, int rows, int kv_positions) {
  return static_cast<int64_t>(num_heads) * rows * kv_positions +
         2 * (static_cast<int64_t>(head) * rows + r);
}

// ---- Attention tiles -----------------------------------------------------------------------

// Query-row tiles of one sequence: ceil(rows / tile_rows).
DLLM_HD inline int TileCount(int rows, int tile_rows) {
  return rows <= 0 ? 0 : (rows + tile_rows - 1) / tile_rows;
}

// Rows of tile `tile` actually present (the last tile may be partial).
DLLM_HD inline int TileRows(int rows, int tile_rows, int tile) {
  const int left = rows - tile * tile_rows;
  return left < tile_rows ? (left < 0 ? 0 : left) : tile_rows;
}

// kv head serving query head `head` (kv head j serves heads j*r .. j*r+r-1).
DLLM_HD inline int KvHeadOf(int head, int num_heads, int num_kv_heads) {
  return head / (num_heads / num_kv_heads);
}

// ---- Vector access -------------------------------------------------------------------------

// Rows can be moved as 16-byte vectors (8 bf16) when their width is a multiple of 8 elements
// (every row then starts 16-byte aligned, given a 16-byte aligned base).
DLLM_HD inline bool RowsVectorizable(int64_t cols) { return cols % 8 == 0; }

// ---- Sampling draws ------------------------------------------------------------------------

// CounterUniform(seed, position, step, id) without indexing the Philox output array at run
// time (on the device that would put the array in local memory): the lane is picked by
// selects. Must equal CounterUniform bit for bit (tested).
DLLM_HD inline float UniformForId(uint64_t seed, int32_t position, int32_t step, int32_t id) {
  const uint32_t draw = static_cast<uint32_t>(id);
  const Philox4x32 block = CounterRandomBlock(seed, position, step, draw >> 2);
  const uint32_t lane = draw & 3u;
  const uint32_t bits = lane == 0   ? block.v[0]
                        : lane == 1 ? block.v[1]
                        : lane == 2 ? block.v[2]
                                    : block.v[3];
  return UniformFromBits(bits);
}

// ---- Ordered keys for selection ----------------------------------------------------------

// Maps a float to a uint32 whose unsigned order is the float order (larger key = larger value),
// so that a radix select over keys ranks tokens by value. NaN maps like -inf (the CPU backend
// replaces NaN by -inf before ranking); -0 maps like +0 (they compare equal as floats, and ties
// are broken by id).
DLLM_HD inline uint32_t OrderedKey(float value) {
  if (value != value) value = -INFINITY;
  if (value == 0.0f) value = 0.0f;
  const uint32_t bits = kmath::FloatBits(value);
  return (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
}

// 8-bit digit `level` (0 = most significant) of a key, and the mask / prefix of the digits
// above it.
DLLM_HD inline int RadixShift(int level) { return 24 - 8 * level; }
DLLM_HD inline uint32_t RadixBin(uint32_t key, int level) {
  return (key >> RadixShift(level)) & 0xffu;
}
DLLM_HD inline bool RadixInRange(uint32_t key, uint32_t prefix, uint32_t mask) {
  return (key & mask) == prefix;
}

inline constexpr int kRadixBins = 256;
inline constexpr int kRadixLevels = 4;

// Probability mass in fixed point (2^-40 units). Integer sums are associative, so histogram
// masses accumulated with atomics in any order are exact and deterministic.
inline constexpr double kMassScale = 1099511627776.0;  // 2^40
DLLM_HD inline uint64_t MassToFixed(float p) {
  if (!(p > 0.0f)) return 0;
  // p > 0 here, so adding 0.5 and truncating rounds to nearest (and works in device code).
  return static_cast<uint64_t>(static_cast<double>(p) * kMassScale + 0.5);  // NOLINT
}

// ---- Top-p: how many leading tokens (in (value desc, id asc) order) have an inclusive
// cumulative probability <= top_p. Radix search over keys with mass histograms.

struct TopPState {
  uint32_t prefix = 0;
  uint32_t mask = 0;
  uint64_t mass_above = 0;   // mass of all tokens ranked before the current key range
  uint32_t count_above = 0;  // their count
  uint32_t within = 0;       // result: count of leading tokens with cumulative mass <= threshold
  int done = 0;
};

// One level: `count`/`mass` are the histograms of digit `level` over the tokens whose key is
// in (prefix, mask). Scans bins from high to low; descends into the bin where the cumulative
// mass first exceeds `threshold`. At the last level that bin is one key value (a tie group of
// equal masses) and the answer is counted arithmetically.
DLLM_HD inline void TopPRadixStep(const uint32_t* count, const uint64_t* mass, uint64_t threshold,
                                  int level, TopPState* s) {
  for (int b = kRadixBins - 1; b >= 0; --b) {
    if (count[b] == 0) continue;
    if (s->mass_above + mass[b] <= threshold) {
      s->mass_above += mass[b];
      s->count_above += count[b];
      continue;
    }
    const int shift = RadixShift(level);
    s->prefix |= static_cast<uint32_t>(b) << shift;
    s->mask |= 0xffu << shift;
    if (level == kRadixLevels - 1) {
      const uint32_t n = count[b];
      const uint64_t each = mass[b] / n;
      uint64_t fit = n;
      if (each > 0) {
        fit = (threshold - s->mass_above) / each;
        if (fit > n) fit = n;
      }
      s->within = s->count_above + static_cast<uint32_t>(fit);
      s->done = 1;
    }
    return;
  }
  // Every token in range fits.
  s->within = s->count_above;
  s->done = 1;
}

// Kept count of the top-p filter (Hugging Face's rule as the CPU backend implements it):
// 1 + the number of leading tokens, among the first vocab-1, whose cumulative mass <= top_p.
DLLM_HD inline int64_t TopPKeptCount(uint32_t within, int64_t vocab) {
  const int64_t w = within;
  return 1 + (w < vocab - 1 ? w : vocab - 1);
}

// ---- Top-k threshold: the key of the element at rank k-1 in (value desc) order. ------------

struct TopKState {
  uint32_t prefix = 0;
  uint32_t mask = 0;
  uint32_t count_above = 0;  // tokens with a key above the final key
  uint32_t group = 0;        // tokens with exactly the final key
  int done = 0;
};

DLLM_HD inline void TopKRadixStep(const uint32_t* count, uint32_t k, int level, TopKState* s) {
  for (int b = kRadixBins - 1; b >= 0; --b) {
    if (count[b] == 0) continue;
    if (s->count_above + count[b] < k) {
      s->count_above += count[b];
      continue;
    }
    const int shift = RadixShift(level);
    s->prefix |= static_cast<uint32_t>(b) << shift;
    s->mask |= 0xffu << shift;
    if (level == kRadixLevels - 1) {
      s->group = count[b];
      s->done = 1;
    }
    return;
  }
  s->done = 1;  // fewer than k tokens in range: cannot happen for k <= vocab; keep all
  s->group = 0;
}

// ---- Id cutoff inside the tie group: the need-th smallest id (need >= 1). ---------------

struct IdSelectState {
  uint32_t prefix = 0;
  uint32_t mask = 0;
  uint32_t count_below = 0;
  int done = 0;
};

DLLM_HD inline void IdRadixStep(const uint32_t* count, uint32_t need, int level, IdSelectState* s) {
  for (int b = 0; b < kRadixBins; ++b) {
    if (count[b] == 0) continue;
    if (s->count_below + count[b] < need) {
      s->count_below += count[b];
      continue;
    }
    const int shift = RadixShift(level);
    s->prefix |= static_cast<uint32_t>(b) << shift;
    s->mask |= 0xffu << shift;
    if (level == kRadixLevels - 1) s->done = 1;
    return;
  }
  s->prefix = 0x7fffffffu;  // fewer than `need` ids: keep the whole group
  s->done = 1;
}

// Whether a token is kept by the filter: above the threshold key, or on it with an id at or
// below the cutoff.
DLLM_HD inline bool KeptByThreshold(uint32_t key, int32_t id, uint32_t threshold_key,
                                    uint32_t id_cut) {
  return key > threshold_key || (key == threshold_key && static_cast<uint32_t>(id) <= id_cut);
}

}  // namespace cuda_index
}  // namespace dllm

#endif  // DLLM_ENGINE_BACKEND_CUDA_CUDA_INDEX_MATH_H_
