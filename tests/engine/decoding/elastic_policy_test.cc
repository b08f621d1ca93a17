#include "engine/decoding/elastic_policy.h"

#include <catch2/catch.hpp>
#include <vector>

#include "tests/engine/decoding/plan_canvas.h"

namespace dllm {
namespace {

// A 4-token prompt (0-3) and a 4-token answer (4-7), nothing decided yet; the decoder's
// candidates (Elastic's window) are 4 and 5.
PlanCanvas MakeCanvas() {
  return PlanCanvas(/*prompt_length=*/4, /*answer_length=*/4, /*block_length=*/4, {4, 5});
}

// Maps of 3 layers whose every row attends to `key[l]` at layer l (one-hot).
AttentionMaps OneHot(int rows, std::vector<int> key) {
  AttentionMaps maps;
  maps.Reset(3, rows, 8);
  for (int l = 0; l < 3; ++l)
    for (int r = 0; r < rows; ++r) maps.Layer(l)[r * 8 + key[l]] = 1.0f;
  return maps;
}

std::vector<RowStats> Predicted(std::vector<int32_t> positions) {
  std::vector<RowStats> out(positions.size());
  for (size_t i = 0; i < positions.size(); ++i) out[i].position = positions[i];
  return out;
}

TEST_CASE("elastic: tracks the most attended non-mask token of each layer", "[decoding][elastic]") {
  const PlanCanvas canvas = MakeCanvas();
  auto policy = MakeElasticPolicy(0.9f);
  CHECK(policy->WantsAttentionMaps());
  CHECK(policy->Plan(canvas.Input(0)).full);
  // Full step 0: rows 0..7. The window rows attend to 2 (layer 0), 6 (a mask: skipped, so
  // the best other key, 0 at zero score, is the lowest position) and 1.
  std::vector<int32_t> all = {0, 1, 2, 3, 4, 5, 6, 7};
  AttentionMaps maps = OneHot(8, {2, 6, 1});
  // Layer 1: give the window some attention on 3 as well, so it wins over the rest.
  for (int r : {4, 5}) {
    maps.Layer(1)[r * 8 + 6] = 0.7f;
    maps.Layer(1)[r * 8 + 3] = 0.3f;
  }
  const std::vector<RowStats> predicted = Predicted({4, 5});
  ForwardOutcome outcome{all, predicted, &maps, 0};
  policy->ObserveForward(outcome);
  CHECK(policy->RecomputeFromLayer() == 0);  // nothing to compare on the first step
  policy->Observe(0, {});
  // Tracked {1, 2, 3}, plus the window; nothing was committed.
  CHECK(policy->Plan(canvas.Input(1)).query_positions == std::vector<int32_t>{1, 2, 3, 4, 5});
}

TEST_CASE("elastic: drift at layer l recomputes layers l+1.. for every row",
          "[decoding][elastic]") {
  const PlanCanvas canvas = MakeCanvas();
  auto policy = MakeElasticPolicy(0.9f);
  REQUIRE(policy->Plan(canvas.Input(0)).full);
  std::vector<int32_t> all = {0, 1, 2, 3, 4, 5, 6, 7};
  // Every row attends to 2 at every layer: tracked {2}.
  AttentionMaps first = OneHot(8, {2, 2, 2});
  const std::vector<RowStats> window = Predicted({4, 5});
  policy->ObserveForward(ForwardOutcome{all, window, &first, 0});
  policy->Observe(0, {});
  const StepPlan plan = policy->Plan(canvas.Input(1));
  REQUIRE(plan.query_positions == std::vector<int32_t>{2, 4, 5});

  SECTION("same attention: no recompute") {
    AttentionMaps same = OneHot(3, {2, 2, 2});
    policy->ObserveForward(ForwardOutcome{plan.query_positions, window, &same, 0});
    CHECK(policy->RecomputeFromLayer() == 0);
  }
  SECTION("token 2's attention moves at layer 1: layers 2.. for every row") {
    AttentionMaps moved = OneHot(3, {2, 2, 2});
    moved.Layer(1)[0 * 8 + 2] = 0.0f;  // row 0 is position 2
    moved.Layer(1)[0 * 8 + 0] = 1.0f;  // cosine 0 < 0.9
    policy->ObserveForward(ForwardOutcome{plan.query_positions, window, &moved, 0});
    CHECK(policy->RecomputeFromLayer() == 2);
    // The second pass's maps (every row, layers 2..) clear the request.
    AttentionMaps rerun = OneHot(8, {2, 2, 2});
    policy->ObserveForward(ForwardOutcome{all, window, &rerun, 2});
    CHECK(policy->RecomputeFromLayer() == 0);
  }
  SECTION("drift only at the last layer: nothing deeper to recompute") {
    AttentionMaps moved = OneHot(3, {2, 2, 2});
    moved.Layer(2)[0 * 8 + 2] = 0.0f;
    moved.Layer(2)[0 * 8 + 0] = 1.0f;
    policy->ObserveForward(ForwardOutcome{plan.query_positions, window, &moved, 0});
    CHECK(policy->RecomputeFromLayer() == 0);
  }
  SECTION("gamma -1 never recomputes; partly similar rows against gamma") {
    auto never = MakeElasticPolicy(-1.0f);
    REQUIRE(never->Plan(canvas.Input(0)).full);
    never->ObserveForward(ForwardOutcome{all, window, &first, 0});
    never->Observe(0, {});
    REQUIRE(never->Plan(canvas.Input(1)).query_positions == plan.query_positions);
    AttentionMaps moved = OneHot(3, {0, 0, 0});
    never->ObserveForward(ForwardOutcome{plan.query_positions, window, &moved, 0});
    CHECK(never->RecomputeFromLayer() == 0);
    // Half of row 2's attention moves at layer 0: cosine 1/sqrt(2) = 0.707.
    AttentionMaps half = OneHot(3, {2, 2, 2});
    half.Layer(0)[0 * 8 + 2] = 0.5f;
    half.Layer(0)[0 * 8 + 0] = 0.5f;
    policy->ObserveForward(ForwardOutcome{plan.query_positions, window, &half, 0});
    CHECK(policy->RecomputeFromLayer() == 1);  // 0.707 < 0.9
    auto lenient = MakeElasticPolicy(0.7f);
    REQUIRE(lenient->Plan(canvas.Input(0)).full);
    lenient->ObserveForward(ForwardOutcome{all, window, &first, 0});
    lenient->Observe(0, {});
    REQUIRE(lenient->Plan(canvas.Input(1)).full == false);
    lenient->ObserveForward(ForwardOutcome{plan.query_positions, window, &half, 0});
    CHECK(lenient->RecomputeFromLayer() == 0);  // 0.707 >= 0.7
  }
}

TEST_CASE("elastic: the last step's commits are recomputed", "[decoding][elastic]") {
  const PlanCanvas canvas = MakeCanvas();
  auto policy = MakeElasticPolicy(0.9f);
  REQUIRE(policy->Plan(canvas.Input(0)).full);
  policy->ObserveForward(ForwardOutcome{});  // no maps (a fake executor): nothing tracked
  policy->Observe(0, std::vector<CommittedToken>{{6, 7, 0.0f}});
  CHECK(policy->Plan(canvas.Input(1)).query_positions == std::vector<int32_t>{4, 5, 6});
}

}  // namespace
}  // namespace dllm
