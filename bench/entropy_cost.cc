#include "bench/entropy_cost.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "bench/bench_clock.h"
#include "engine/backend/cpu/cpu_row_stats.h"
#include "engine/backend/kernel_math.h"

namespace dllm::bench {
namespace {

// The entropy's own work in kmath::EntropyAdd, alone: per logit one multiply and one add into
// the weighted sum, with the kernel's rounding, on e = exp(l - m) and d = l - m, which the
// fused pass has at hand anyway (here precomputed). One serial chain: nothing to overlap it
// with, so this bounds what the fused pass can pay for it from above.
[[gnu::noinline]] float EntropyChain(const float* e, const float* d, int vocab) {
  float weighted = 0.0f;
  for (int i = 0; i < vocab; ++i) weighted = kmath::AddRn(weighted, kmath::MulRn(e[i], d[i]));
  return weighted;
}

// The streamed pass of ComputeRowStats (finite check, softmax state, top two), with the
// entropy's accumulator (kEntropy, kmath::EntropyAdd itself) or without it (the same rescaled
// max and normalizer, no weighted sum). Their difference is only reported (fused_entropy_ns):
// the two copies sit at different addresses, and that alone moves it by more than the
// entropy's work (see entropy_cost.h). The result is folded into a float so that nothing is
// dropped by the compiler.
template <bool kEntropy>
float StreamedPass(const float* logits, int vocab) {
  kmath::EntropyState state;
  kmath::Top2 top2;
  bool finite = true;
  for (int i = 0; i < vocab; ++i) {
    const float l = logits[i];
    finite &= std::isfinite(l);
    if constexpr (kEntropy) {
      kmath::EntropyAdd(&state, l);
    } else if (l > state.max) {
      state.sum = state.max == -INFINITY
                      ? 1.0f
                      : kmath::AddRn(kmath::MulRn(state.sum, expf(state.max - l)), 1.0f);
      state.max = l;
    } else {
      state.sum = kmath::AddRn(state.sum, expf(l - state.max));
    }
    kmath::Top2Add(&top2, l, i);
  }
  if (!finite) return std::numeric_limits<float>::quiet_NaN();
  const float p1 = kmath::EntropyStateProb(state, top2.value1);
  const float h = kEntropy ? kmath::EntropyNats(state) : 0.0f;
  return p1 + h + static_cast<float>(top2.id1);
}

}  // namespace

EntropyCost MeasureEntropyCost(int vocab, int rows, int repeats) {
  assert(vocab > 1 && rows >= 0 && repeats > 0);
  if (rows == 0) rows = vocab >= 65536 ? 32 : 512;
  // Logits shaped like an LM head's: mostly small, a few large (a peaked distribution).
  std::mt19937 rng(12345);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::vector<float> logits(static_cast<size_t>(vocab) * rows);
  for (float& x : logits) x = normal(rng);
  for (int r = 0; r < rows; ++r) logits[static_cast<size_t>(r) * vocab + (r * 7919) % vocab] += 12;

  // The chain's inputs: each row's exp(l - m) and l - m against the row's max.
  std::vector<float> exps(logits.size()), diffs(logits.size());
  for (int r = 0; r < rows; ++r) {
    const float* row = &logits[static_cast<size_t>(r) * vocab];
    const float m = *std::max_element(row, row + vocab);
    for (int i = 0; i < vocab; ++i) {
      const size_t at = static_cast<size_t>(r) * vocab + i;
      diffs[at] = row[i] - m;
      exps[at] = expf(diffs[at]);
    }
  }

  EntropyCost cost;
  cost.vocab = vocab;
  double kernel = std::numeric_limits<double>::infinity();
  double chain = kernel, with = kernel, without = kernel;
  RowStatsScratch scratch;
  LogitsRowRequest request;
  volatile float sink = 0;
  auto time_rows = [&](auto&& row_fn) {
    const auto start = Clock::now();
    float acc = 0;
    for (int r = 0; r < rows; ++r) acc += row_fn(&logits[static_cast<size_t>(r) * vocab], r);
    sink = sink + acc;
    return Seconds(start) * 1e9 / rows;
  };
  // Interleaved, best of `repeats`: a loaded machine slows some repetitions, not the minimum.
  for (int rep = 0; rep < repeats; ++rep) {
    kernel = std::min(kernel, time_rows([&](const float* row, int r) {
                        request.position = r;
                        const RowStats s = ComputeRowStats(row, vocab, request, &scratch);
                        return s.entropy_nats + s.margin;
                      }));
    chain = std::min(chain, time_rows([&](const float*, int r) {
                       const size_t at = static_cast<size_t>(r) * vocab;
                       return EntropyChain(&exps[at], &diffs[at], vocab);
                     }));
    with = std::min(
        with, time_rows([&](const float* row, int) { return StreamedPass<true>(row, vocab); }));
    without = std::min(
        without, time_rows([&](const float* row, int) { return StreamedPass<false>(row, vocab); }));
  }
  cost.row_stats_ns = kernel;
  cost.entropy_ns = chain;
  cost.fused_entropy_ns = std::max(0.0, with - without);
  return cost;
}

}  // namespace dllm::bench
