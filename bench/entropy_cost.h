// What EntropyCache's decision signal costs inside the LM head's row statistics.
//
// The engine computes every predicted row's statistics in one streamed pass over the logits
// (engine/backend/cpu/cpu_row_stats.cc): the running max and softmax normalizer (which the
// argmax probability and the threshold rule need anyway), the top two, and the entropy's
// extra accumulator Σ exp(l - m)(l - m). Only the last is EntropyCache's.
//
// Its marginal cost inside the fused pass cannot be measured reliably. It is a multiply-add
// per logit on a chain of its own, which the core overlaps with the exp; the difference between
// the pass with and without it came out anywhere from 0 to 166 ns per row at vocabulary 576
// on AMD EPYC, depending on where the linker placed the code (a binary measured 0 in every
// run, another 160 in every run). So dllm-bench charges an upper bound that does not depend on
// overlap: the same multiply-adds run alone, as one serial chain over the row's vocabulary
// with the kernel's rounding (`entropy_ns`). The fused difference is reported beside it.
#ifndef DLLM_BENCH_ENTROPY_COST_H_
#define DLLM_BENCH_ENTROPY_COST_H_

namespace dllm::bench {

struct EntropyCost {
  int vocab = 0;
  double row_stats_ns = 0;  // per row: the production kernel (ComputeRowStats), entropy included
  // per row: the entropy's multiply-adds alone, one serial chain (the charged upper bound)
  double entropy_ns = 0;
  // per row: the streamed pass with the entropy minus the same pass without it (>= 0; what
  // the fused kernel pays, but layout-sensitive: see above)
  double fused_entropy_ns = 0;
  double entropy_share() const { return row_stats_ns > 0 ? entropy_ns / row_stats_ns : 0.0; }
};

// Times the kernel, the entropy chain and both streamed passes over `rows` random rows of
// `vocab` logits, interleaved, best of `repeats`, one thread (the engine spreads rows over
// threads; the per-row figure is what a thread pays). rows = 0 picks 512 rows below a
// vocabulary of 65,536 and 32 from there.
// Precondition: vocab > 1, rows >= 0, repeats > 0.
EntropyCost MeasureEntropyCost(int vocab, int rows = 0, int repeats = 31);

}  // namespace dllm::bench

#endif  // DLLM_BENCH_ENTROPY_COST_H_
