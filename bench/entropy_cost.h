// What EntropyCache's decision signal costs inside the LM head's row statistics.
//
// The engine computes every predicted row's statistics in one streamed pass over the logits
// (engine/backend/cpu/cpu_row_stats.cc): the running max and softmax normalizer (which the
// argmax probability and the threshold rule need anyway), the top two, and the entropy's
// extra accumulator Σ exp(l - m)(l - m). Only the last is EntropyCache's. This measures the
// production CPU kernel (ComputeRowStats, greedy) against the same pass without the entropy
// accumulator (two copies of the kernel's pass, one template, differing only in the entropy),
// on random logits of a given vocabulary, so dllm-bench can charge the entropy
// to the policy's decision cost (the paper counts the entropy and the history bookkeeping
// together) and dllm-rowstats-bench can print its share.
#ifndef DLLM_BENCH_ENTROPY_COST_H_
#define DLLM_BENCH_ENTROPY_COST_H_

namespace dllm::bench {

struct EntropyCost {
  int vocab = 0;
  double row_stats_ns = 0;  // per row: the production kernel, entropy included
  // per row: the kernel less the entropy's measured work (with-pass minus without-pass)
  double without_entropy_ns = 0;
  // Per row attributable to the entropy (>= 0; timing noise clamps at 0).
  double entropy_ns() const {
    return row_stats_ns > without_entropy_ns ? row_stats_ns - without_entropy_ns : 0.0;
  }
  double entropy_share() const { return row_stats_ns > 0 ? entropy_ns() / row_stats_ns : 0.0; }
};

// Times both passes over `rows` random rows of `vocab` logits, best of `repeats`, one thread
// (the engine spreads rows over threads; the per-row figure is what a thread pays).
// Precondition: vocab > 1, rows > 0, repeats > 0.
EntropyCost MeasureEntropyCost(int vocab, int rows = 64, int repeats = 7);

}  // namespace dllm::bench

#endif  // DLLM_BENCH_ENTROPY_COST_H_
