// Host tests of the CUDA backend's index math and selection logic (cuda_index_math.h,
// arena_free_list.h). These headers are plain C++, so the decisions the kernels make (slab
// offsets, tiles, RNG lane selection, the radix search behind top-p / top-k sampling) are
// checked here against independent references even on machines without a GPU. The radix
// search is driven by a sequential simulation of the kernel's passes (same step functions,
// histograms filled in a loop instead of with atomics) and compared with a sort-based
// reference of the CPU backend's rule.
#include "engine/backend/cuda/cuda_index_math.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "engine/backend/counter_rng.h"
#include "engine/backend/cuda/arena_free_list.h"
#include "engine/backend/kernel_math.h"

namespace dllm {
namespace {

using cuda_index::OrderedKey;

TEST_CASE("cuda index: slab row offsets enumerate the KvPool layout in order") {
  const int layers = 3, capacity = 5, kv_width = 7;
  int64_t expected = 0;
  for (int layer = 0; layer < layers; ++layer) {
    for (int plane = 0; plane < 2; ++plane) {
      for (int pos = 0; pos < capacity; ++pos) {
        REQUIRE(cuda_index::SlabRowOffset(layer, plane, pos, capacity, kv_width) == expected);
        expected += kv_width;
      }
    }
  }
  REQUIRE(cuda_index::SlabElements(layers, capacity, kv_width) == expected);
}

TEST_CASE("cuda index: attention tiles cover every row exactly once") {
  for (int tile_rows : {16, 32, 64}) {
    for (int rows = 0; rows <= 200; ++rows) {
      std::vector<int> seen(static_cast<size_t>(rows), 0);
      const int count = cuda_index::TileCount(rows, tile_rows);
      for (int t = 0; t < count; ++t) {
        const int n = cuda_index::TileRows(rows, tile_rows, t);
        REQUIRE(n >= 1);
        REQUIRE(n <= tile_rows);
        for (int r = 0; r < n; ++r) ++seen[static_cast<size_t>(t) * tile_rows + r];
      }
      for (int s : seen) REQUIRE(s == 1);
    }
  }
}

TEST_CASE("cuda index: a sequence's scores area holds every score and (max, sum) once") {
  // The attention kernels write through ScoreIndex/ScoreStatsIndex, the normalizing kernel
  // reads through them, and the backend sizes the area with ScoresFloats: the writes must
  // tile the area exactly, or one head's row would overwrite another's.
  for (int heads : {1, 3, 32}) {
    for (int rows : {1, 5, 64}) {
      for (int kv : {1, 7, 261}) {
        std::vector<int> seen(static_cast<size_t>(cuda_index::ScoresFloats(heads, rows, kv)), 0);
        for (int h = 0; h < heads; ++h) {
          for (int r = 0; r < rows; ++r) {
            for (int n = 0; n < kv; ++n) {
              ++seen.at(static_cast<size_t>(cuda_index::ScoreIndex(h, r, n, rows, kv)));
            }
            const int64_t stats = cuda_index::ScoreStatsIndex(h, r, heads, rows, kv);
            ++seen.at(static_cast<size_t>(stats));
            ++seen.at(static_cast<size_t>(stats + 1));
          }
        }
        INFO(heads << " heads, " << rows << " rows, " << kv << " positions");
        CHECK(std::all_of(seen.begin(), seen.end(), [](int c) { return c == 1; }));
      }
    }
  }
}

TEST_CASE("cuda index: kv head mapping matches GQA repeat_interleave") {
  // Dream: 28 heads over 4 kv heads, 7 per group.
  for (int h = 0; h < 28; ++h) REQUIRE(cuda_index::KvHeadOf(h, 28, 4) == h / 7);
  for (int h = 0; h < 32; ++h) REQUIRE(cuda_index::KvHeadOf(h, 32, 32) == h);
}

TEST_CASE("cuda index: UniformForId equals CounterUniform bit for bit") {
  for (uint64_t seed : {uint64_t{0}, uint64_t{42}, uint64_t{0x123456789abcdefULL}}) {
    for (int32_t id = 0; id < 2000; id += 3) {
      const float a = cuda_index::UniformForId(seed, 17, 5, id);
      const float b = CounterUniform(seed, 17, 5, static_cast<uint32_t>(id));
      REQUIRE(kmath::FloatBits(a) == kmath::FloatBits(b));
    }
  }
}

TEST_CASE("cuda index: ordered keys follow float order, NaN as -inf, -0 as +0") {
  std::vector<float> values = {-INFINITY, -1e30f, -2.5f, -1.0f, -1e-30f, 0.0f,
                               1e-30f,    1.0f,   2.5f,  1e30f, INFINITY};
  for (size_t i = 0; i + 1 < values.size(); ++i) {
    REQUIRE(OrderedKey(values[i]) < OrderedKey(values[i + 1]));
  }
  REQUIRE(OrderedKey(-0.0f) == OrderedKey(0.0f));
  REQUIRE(OrderedKey(std::nanf("")) == OrderedKey(-INFINITY));
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.0f, 10.0f);
  for (int i = 0; i < 10000; ++i) {
    const float a = dist(rng), b = dist(rng);
    REQUIRE((a < b) == (OrderedKey(a) < OrderedKey(b)));
    REQUIRE((a == b) == (OrderedKey(a) == OrderedKey(b)));
  }
}

// ---- Radix top-p / top-k: simulation of the kernel's passes ------------------------------

struct FilterResult {
  bool keep_all = true;
  uint32_t threshold_key = 0;
  uint32_t id_cut = 0x7fffffffu;
  int64_t kept = 0;
};

float ZOf(float v, float temperature) { return std::isnan(v) ? -INFINITY : v / temperature; }

// The control flow of LogitsStatsKernel's filtered-sampling section, sequentially.
FilterResult SimulateKernelFilter(const std::vector<float>& logits, float temperature, int top_k,
                                  float top_p) {
  const int64_t vocab = static_cast<int64_t>(logits.size());
  const bool top_k_on = top_k > 0 && top_k < vocab;
  const bool top_p_on = top_p < 1.0f;
  std::vector<uint32_t> count(cuda_index::kRadixBins);
  std::vector<uint64_t> mass(cuda_index::kRadixBins);
  auto clear = [&]() {
    std::fill(count.begin(), count.end(), 0u);
    std::fill(mass.begin(), mass.end(), uint64_t{0});
  };
  FilterResult r;
  int64_t kept = vocab;
  if (top_p_on) {
    float z_max = -INFINITY;
    for (float v : logits) z_max = std::max(z_max, ZOf(v, temperature));
    float z_sum = 0.0f;
    for (float v : logits) z_sum += std::exp(ZOf(v, temperature) - z_max);
    const uint64_t threshold = cuda_index::MassToFixed(top_p);
    cuda_index::TopPState st;
    for (int level = 0; level < cuda_index::kRadixLevels; ++level) {
      clear();
      for (float v : logits) {
        const float z = ZOf(v, temperature);
        const uint32_t key = OrderedKey(z);
        if (!cuda_index::RadixInRange(key, st.prefix, st.mask)) continue;
        const uint32_t bin = cuda_index::RadixBin(key, level);
        ++count[bin];
        mass[bin] += cuda_index::MassToFixed(std::exp(z - z_max) / z_sum);
      }
      cuda_index::TopPRadixStep(count.data(), mass.data(), threshold, level, &st);
      if (st.done) break;
    }
    REQUIRE(st.done == 1);
    kept = cuda_index::TopPKeptCount(st.within, vocab);
  }
  if (top_k_on && top_k < kept) kept = top_k;
  r.kept = kept;
  r.keep_all = kept >= vocab;
  if (r.keep_all) return r;
  cuda_index::TopKState tk;
  for (int level = 0; level < cuda_index::kRadixLevels; ++level) {
    clear();
    for (float v : logits) {
      const uint32_t key = OrderedKey(ZOf(v, temperature));
      if (cuda_index::RadixInRange(key, tk.prefix, tk.mask)) {
        ++count[cuda_index::RadixBin(key, level)];
      }
    }
    cuda_index::TopKRadixStep(count.data(), static_cast<uint32_t>(kept), level, &tk);
    if (tk.done) break;
  }
  r.threshold_key = tk.prefix;
  REQUIRE(tk.group > 0);
  const uint32_t need = static_cast<uint32_t>(kept) - tk.count_above;
  if (need < tk.group) {
    cuda_index::IdSelectState is;
    for (int level = 0; level < cuda_index::kRadixLevels; ++level) {
      clear();
      for (int64_t id = 0; id < vocab; ++id) {
        if (OrderedKey(ZOf(logits[id], temperature)) != r.threshold_key) continue;
        const uint32_t id_key = static_cast<uint32_t>(id);
        if (cuda_index::RadixInRange(id_key, is.prefix, is.mask)) {
          ++count[cuda_index::RadixBin(id_key, level)];
        }
      }
      cuda_index::IdRadixStep(count.data(), need, level, &is);
      if (is.done) break;
    }
    r.id_cut = is.prefix;
  }
  return r;
}

// The CPU backend's rule (cpu_row_stats.cc): sort by (z desc, id asc), sequential cumulative
// sum for top-p, then top-k. Returns the kept ids in rank order.
std::vector<int32_t> ReferenceKept(const std::vector<float>& logits, float temperature, int top_k,
                                   float top_p) {
  const int vocab = static_cast<int>(logits.size());
  std::vector<float> z(logits.size());
  for (int i = 0; i < vocab; ++i) z[i] = ZOf(logits[i], temperature);
  std::vector<int32_t> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(),
            [&](int32_t a, int32_t b) { return kmath::RanksBefore(z[a], a, z[b], b); });
  int64_t kept = vocab;
  if (top_p < 1.0f) {
    const float z_max = z[order[0]];
    float sum = 0.0f;
    for (int i = 0; i < vocab; ++i) sum += std::exp(z[i] - z_max);
    float cumulative = 0.0f;
    kept = 1;
    for (int64_t r = 0; r + 1 < vocab; ++r) {
      cumulative += std::exp(z[order[r]] - z_max) / sum;
      if (cumulative > top_p) break;
      kept = r + 2;
    }
  }
  if (top_k > 0 && top_k < kept) kept = top_k;
  order.resize(static_cast<size_t>(kept));
  return order;
}

void CheckFilterAgainstReference(const std::vector<float>& logits, float temperature, int top_k,
                                 float top_p) {
  INFO("vocab " << logits.size() << " T " << temperature << " top_k " << top_k << " top_p "
                << top_p);
  const FilterResult sim = SimulateKernelFilter(logits, temperature, top_k, top_p);
  std::vector<int32_t> expected = ReferenceKept(logits, temperature, top_k, top_p);
  std::sort(expected.begin(), expected.end());
  std::vector<int32_t> got;
  for (int32_t id = 0; id < static_cast<int32_t>(logits.size()); ++id) {
    const uint32_t key = OrderedKey(ZOf(logits[id], temperature));
    if (sim.keep_all || cuda_index::KeptByThreshold(key, id, sim.threshold_key, sim.id_cut)) {
      got.push_back(id);
    }
  }
  REQUIRE(static_cast<int64_t>(got.size()) == sim.kept);
  REQUIRE(got == expected);
}

TEST_CASE("cuda index: radix top-k / top-p selection matches the sort-based rule") {
  std::mt19937 rng(1234);
  std::normal_distribution<float> dist(0.0f, 3.0f);
  for (int vocab : {1, 2, 7, 320, 5000}) {
    std::vector<float> logits(static_cast<size_t>(vocab));
    for (float& v : logits) v = dist(rng);
    for (float temperature : {0.7f, 1.0f, 1.5f}) {
      for (int top_k : {0, 1, 3, 50, vocab - 1}) {
        for (float top_p : {1.0f, 0.0f, 0.5f, 0.9f, 0.999f}) {
          CheckFilterAgainstReference(logits, temperature, top_k, top_p);
        }
      }
    }
  }
}

TEST_CASE("cuda index: radix selection breaks value ties by id") {
  // bf16-quantized logits on a coarse grid: many exact ties, including at the cutoffs.
  std::mt19937 rng(99);
  std::uniform_int_distribution<int> level(-8, 8);
  for (int trial = 0; trial < 20; ++trial) {
    std::vector<float> logits(600);
    for (float& v : logits) v = kmath::RoundBf16(0.25f * static_cast<float>(level(rng)));
    logits[17] = std::nanf("");
    logits[400] = -0.0f;
    for (int top_k : {1, 2, 5, 37, 300}) {
      CheckFilterAgainstReference(logits, 1.0f, top_k, 1.0f);
      CheckFilterAgainstReference(logits, 1.0f, top_k, 0.6f);
    }
    CheckFilterAgainstReference(logits, 1.0f, 0, 0.3f);
  }
}

TEST_CASE("cuda index: TopPRadixStep counts inside an equal-mass tie group") {
  // Five tokens of equal probability 0.2: top_p 0.5 keeps 1 + 2 (cumulative 0.2, 0.4 <= 0.5).
  std::vector<float> logits(5, 1.0f);
  const FilterResult sim = SimulateKernelFilter(logits, 1.0f, 0, 0.5f);
  REQUIRE(sim.kept == 3);
  REQUIRE(sim.id_cut == 2u);
}

// ---- Arena free list ----------------------------------------------------------------------

TEST_CASE("cuda arena free list: first fit, alignment, exhaustion and coalescing") {
  cuda::ArenaFreeList list(4096);
  REQUIRE(list.capacity_bytes() == 4096);
  auto a = list.Allocate(1);    // rounds to 256
  auto b = list.Allocate(300);  // 512
  auto c = list.Allocate(256);
  REQUIRE(a.has_value());
  REQUIRE(b.has_value());
  REQUIRE(c.has_value());
  REQUIRE(*a == 0);
  REQUIRE(*b == 256);
  REQUIRE(*c == 768);
  REQUIRE(list.free_bytes() == 4096 - 1024);
  REQUIRE_FALSE(list.Allocate(4096).has_value());
  list.Free(*b, 300);
  REQUIRE(list.free_ranges() == 2);
  auto d = list.Allocate(512);  // reuses b's hole (first fit)
  REQUIRE(d.has_value());
  REQUIRE(*d == 256);
  list.Free(*a, 1);
  list.Free(*d, 512);
  list.Free(*c, 256);
  REQUIRE(list.free_ranges() == 1);
  REQUIRE(list.free_bytes() == 4096);
  auto all = list.Allocate(4096);
  REQUIRE(all.has_value());
  REQUIRE(*all == 0);
}

TEST_CASE("cuda arena free list: random alloc/free keeps ranges disjoint") {
  cuda::ArenaFreeList list(int64_t{1} << 20);
  std::mt19937 rng(5);
  std::vector<std::pair<int64_t, int64_t>> live;
  for (int step = 0; step < 2000; ++step) {
    if (live.empty() || rng() % 2 == 0) {
      const int64_t bytes = 1 + static_cast<int64_t>(rng() % 20000);
      if (auto off = list.Allocate(bytes)) {
        const int64_t size = cuda::ArenaRoundUp(bytes);
        REQUIRE(*off % cuda::kArenaAlignment == 0);
        REQUIRE(*off + size <= list.capacity_bytes());
        for (const auto& [o, s] : live) {
          REQUIRE((*off + size <= o || o + cuda::ArenaRoundUp(s) <= *off));
        }
        live.emplace_back(*off, bytes);
      }
    } else {
      const size_t i = rng() % live.size();
      list.Free(live[i].first, live[i].second);
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(i));
    }
  }
  for (const auto& [o, s] : live) list.Free(o, s);
  REQUIRE(list.free_ranges() == 1);
  REQUIRE(list.free_bytes() == list.capacity_bytes());
}

TEST_CASE("kernel_math: bf16 reference-rounding helpers round at each step") {
  const float x = 1.2345678f, inv = 0.987654f, w = 1.1111111f;
  REQUIRE(kmath::RmsNormElementBf16(x, inv, w) == kmath::RoundBf16(kmath::RoundBf16(x * inv) * w));
  REQUIRE(kmath::SwiGluElementBf16(0.75f, -1.3f) ==
          kmath::RoundBf16(kmath::RoundBf16(kmath::Silu(0.75f)) * -1.3f));
}

}  // namespace
}  // namespace dllm
