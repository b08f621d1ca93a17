// dllm-rowstats-bench: the share of EntropyCache's entropy in the LM head's row statistics
// on this CPU (bench/entropy_cost.h), per vocabulary size.
//
//   dllm-rowstats-bench [VOCAB ...]    (default: 512 126464 152064: the repo's long models,
//                                        LLaDA-8B and Dream-7B)
//
// One JSON line per vocabulary: the row statistics' ns per row, the entropy's ns per row (its
// multiply-adds alone: the charged upper bound) and its share of the row statistics, and the
// difference measured inside the fused pass (layout-sensitive: bench/entropy_cost.h). The row
// statistics themselves are a small part of a step (a forward is ~2·params FLOPs per row);
// dllm-bench charges the entropy's ns per row times the predicted rows to EntropyCache's decision
// cost.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench/entropy_cost.h"

int main(int argc, char** argv) {
  std::vector<int> vocabs;
  for (int i = 1; i < argc; ++i) {
    char* end = nullptr;
    const long v = std::strtol(argv[i], &end, 10);
    if (end == argv[i] || *end != '\0' || v < 2 || v > (1 << 24)) {
      std::fprintf(stderr, "dllm-rowstats-bench: '%s' is not a vocabulary size in [2, 2^24]\n",
                   argv[i]);
      return 2;
    }
    vocabs.push_back(static_cast<int>(v));
  }
  if (vocabs.empty()) vocabs = {512, 126464, 152064};
  for (int vocab : vocabs) {
    const dllm::bench::EntropyCost c = dllm::bench::MeasureEntropyCost(vocab);
    std::printf(
        "{\"vocab\": %d, \"row_stats_ns_per_row\": %.1f, \"entropy_ns_per_row\": %.1f, "
        "\"fused_entropy_ns_per_row\": %.1f, \"entropy_share_of_row_stats\": %.4f}\n",
        c.vocab, c.row_stats_ns, c.entropy_ns, c.fused_entropy_ns, c.entropy_share());
  }
  return 0;
}
