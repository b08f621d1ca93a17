#include "engine/decoding/d2cache_policy.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <vector>

#include "tests/engine/decoding/plan_canvas.h"

namespace dllm {
namespace {

// The density straight from its definition: the whole integer line, the prompt side decided,
// the far side decided iff the answer's last position is.
double DensityByDefinition(const std::vector<uint8_t>& decided, int i, double sigma) {
  const int G = static_cast<int>(decided.size());
  double sum = 0, norm = 0;
  for (int n = -2000; n <= 2000; ++n) norm += std::exp(-double(n) * n / (2 * sigma * sigma));
  for (int j = -2000; j < G + 2000; ++j) {
    const bool d = j < 0 ? true : (j >= G ? decided[G - 1] != 0 : decided[j] != 0);
    if (d) sum += std::exp(-double(i - j) * (i - j) / (2 * sigma * sigma));
  }
  return sum / norm;
}

TEST_CASE("Certainty density matches its definition", "[decoding][d2cache]") {
  const std::vector<uint8_t> decided = {1, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0};
  for (double sigma : {1.0, 3.0, 10.0}) {
    const std::vector<double> got = CertaintyDensity(decided, sigma);
    REQUIRE(got.size() == decided.size());
    for (size_t i = 0; i < decided.size(); ++i) {
      INFO("sigma " << sigma << " i " << i);
      CHECK(got[i] ==
            Approx(DensityByDefinition(decided, static_cast<int>(i), sigma)).epsilon(1e-9));
    }
  }
  // All decided: every kernel weight lands on a decided position.
  for (double v : CertaintyDensity(std::vector<uint8_t>(12, 1), 10.0)) CHECK(v == Approx(1.0));
  // Nothing decided: the prompt side only, fading with distance from it.
  const std::vector<double> fade = CertaintyDensity(std::vector<uint8_t>(12, 0), 3.0);
  for (size_t i = 1; i < fade.size(); ++i) CHECK(fade[i] < fade[i - 1]);
}

// A 4-token prompt and a 12-token answer in blocks of 4; the first block's first two
// positions are decided, the decoder's candidates are the block's other two.
PlanCanvas MakeCanvas() {
  PlanCanvas canvas(/*prompt_length=*/4, /*answer_length=*/12, /*block_length=*/4, {6, 7});
  canvas.decided[4] = canvas.decided[5] = 1;
  return canvas;
}

std::vector<CommittedToken> Commits(const std::vector<int32_t>& positions) {
  std::vector<CommittedToken> out;
  out.reserve(positions.size());
  for (int32_t p : positions) out.push_back(CommittedToken{p, 7, 0.0f});
  return out;
}

TEST_CASE("d2cache: full first step, then density-ranked masks and the last commits",
          "[decoding][d2cache]") {
  const PlanCanvas canvas = MakeCanvas();
  auto policy = MakeD2CachePolicy(/*current_k=*/3, /*rollout_p=*/0.1f, /*sigma=*/10.0f, 512);
  CHECK(policy->WantsAttentionMaps());
  CHECK(policy->Plan(canvas.Input(0)).full);
  policy->ObserveForward(ForwardOutcome{});  // no maps: no nucleus next step
  policy->Observe(0, Commits({4, 5}));
  const StepPlan p1 = policy->Plan(canvas.Input(1));
  CHECK_FALSE(p1.full);
  // current_k 3: the third mask (answer index 4, position 8) ends the count; the search runs
  // to the end of its block (position 11). The block's masks 6, 7 rank first; of 8..11, all
  // unseen (confidence 1/512), the densest, 8, next to the decided ones. Plus commits 4, 5.
  CHECK(p1.query_positions == std::vector<int32_t>{4, 5, 6, 7, 8});
}

TEST_CASE("d2cache: the latest predicted confidence ranks the masks", "[decoding][d2cache]") {
  const PlanCanvas canvas = MakeCanvas();
  auto policy = MakeD2CachePolicy(3, 0.1f, 10.0f, 512);
  REQUIRE(policy->Plan(canvas.Input(0)).full);
  std::vector<RowStats> rows(2);
  rows[0].position = 8;
  rows[0].argmax_prob = 0.001f;
  rows[1].position = 10;
  rows[1].argmax_prob = 0.9f;
  ForwardOutcome outcome;
  outcome.predicted = rows;
  policy->ObserveForward(outcome);
  policy->Observe(0, Commits({}));
  // Position 10's confidence outweighs 8's density edge; no commits this time.
  CHECK(policy->Plan(canvas.Input(1)).query_positions == std::vector<int32_t>{6, 7, 10});
}

TEST_CASE("d2cache: the rollout nucleus adds the most attended positions", "[decoding][d2cache]") {
  const PlanCanvas canvas = MakeCanvas();
  auto policy = MakeD2CachePolicy(3, 0.1f, 10.0f, 512);
  REQUIRE(policy->Plan(canvas.Input(0)).full);
  // A full step: every row attends to prompt position 1 at every layer.
  std::vector<int32_t> all(16);
  for (int i = 0; i < 16; ++i) all[i] = i;
  AttentionMaps maps;
  maps.Reset(2, 16, 16);
  for (int l = 0; l < 2; ++l)
    for (int r = 0; r < 16; ++r) maps.Layer(l)[r * 16 + 1] = 1.0f;
  ForwardOutcome outcome;
  outcome.query_rows = all;
  outcome.attention = &maps;
  policy->ObserveForward(outcome);
  policy->Observe(0, Commits({4, 5}));
  CHECK(policy->Plan(canvas.Input(1)).query_positions == std::vector<int32_t>{1, 4, 5, 6, 7, 8});

  // rollout_p 1 and current_k >= the answer: every position, every step (equivalent to none).
  auto everything = MakeD2CachePolicy(12, 1.0f, 10.0f, 512);
  REQUIRE(everything->Plan(canvas.Input(0)).full);
  everything->ObserveForward(outcome);
  everything->Observe(0, Commits({4, 5}));
  CHECK(everything->Plan(canvas.Input(1)).query_positions == all);
}

TEST_CASE("d2cache: the decoder's candidates are always recomputed", "[decoding][d2cache]") {
  // current_k 1 keeps one mask by density; the block's other candidate is still a row.
  const PlanCanvas canvas = MakeCanvas();
  auto policy = MakeD2CachePolicy(1, 0.1f, 10.0f, 512);
  REQUIRE(policy->Plan(canvas.Input(0)).full);
  policy->Observe(0, Commits({}));
  CHECK(policy->Plan(canvas.Input(1)).query_positions == std::vector<int32_t>{6, 7});
}

}  // namespace
}  // namespace dllm
