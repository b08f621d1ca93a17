// bench/entropy_cost: the figures dllm-bench charges to EntropyCache's decision. Timings are
// not asserted against any bound (these machines are noisy); what is asserted is what the
// charge must never be: zero, negative or not a number, as the fused difference it was once
// taken from read on one build (bench/entropy_cost.h).
#include "bench/entropy_cost.h"

#include <catch2/catch.hpp>
#include <cmath>

namespace dllm::bench {
namespace {

void CheckCost(const EntropyCost& cost, int vocab) {
  CHECK(cost.vocab == vocab);
  CHECK(std::isfinite(cost.row_stats_ns));
  CHECK(std::isfinite(cost.entropy_ns));
  CHECK(std::isfinite(cost.fused_entropy_ns));
  CHECK(cost.row_stats_ns > 0);
  // A serial chain of `vocab` multiply-adds cannot take 0 ns.
  CHECK(cost.entropy_ns > 0);
  CHECK(cost.fused_entropy_ns >= 0);
  CHECK(cost.entropy_share() == cost.entropy_ns / cost.row_stats_ns);
}

TEST_CASE("entropy_cost: the charged entropy term is a positive, finite time per row") {
  // The cot models' vocabulary, with few rows and repeats: the same code path as dllm-bench's.
  CheckCost(MeasureEntropyCost(576, 16, 3), 576);
  // A vocabulary that is not a multiple of any vector width.
  CheckCost(MeasureEntropyCost(1001, 8, 2), 1001);
}

TEST_CASE("entropy_cost: an unmeasured cost has no share") {
  const EntropyCost empty;
  CHECK(empty.entropy_share() == 0.0);
}

}  // namespace
}  // namespace dllm::bench
