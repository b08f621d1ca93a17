#include "engine/decoding/cache_policy.h"

#include <catch2/catch.hpp>
#include <limits>

#include "tests/engine/decoding/entropy_cache_params.h"

namespace dllm {
namespace {

std::vector<CommittedToken> Commits(const std::vector<std::pair<int32_t, float>>& pos_entropy) {
  std::vector<CommittedToken> out;
  out.reserve(pos_entropy.size());
  for (auto [p, e] : pos_entropy) out.push_back(CommittedToken{p, 7, e});
  return out;
}

// End tokens committed at `positions` (entropy 0).
std::vector<CommittedToken> EndCommits(const std::vector<int32_t>& positions) {
  std::vector<CommittedToken> out;
  out.reserve(positions.size());
  for (int32_t p : positions) out.push_back(CommittedToken{p, 2, 0.0f, /*end_token=*/true});
  return out;
}

PlanInput Input(int step, const std::vector<int32_t>& candidates, bool block_start = false,
                int32_t lo = 0, int32_t hi = 0, int32_t canvas_end = 0) {
  PlanInput in;
  in.step = step;
  in.candidates = candidates;
  in.block_start = block_start;
  in.block_begin = lo;
  in.block_end = hi;
  in.canvas_end = canvas_end;
  in.answer_end = canvas_end;
  return in;
}

TEST_CASE("Entropy policy follows the scripted max-entropy signal", "[decoding][cache_policy]") {
  auto policy = MakeCachePolicy(testing::EntropyCache(0.5f, 2), /*vocab_size=*/512);
  const std::vector<int32_t> cand = {20, 21, 22};
  // step 0 is always full
  CHECK(policy->Plan(Input(0, cand)).full);
  // max entropy 0.4 <= tau -> partial
  policy->Observe(0, Commits({{10, 0.1f}, {11, 0.4f}}));
  StepPlan p1 = policy->Plan(Input(1, cand));
  CHECK_FALSE(p1.full);
  CHECK(p1.query_positions == std::vector<int32_t>{10, 11, 20, 21, 22});
  // one token above tau -> full (max, not mean)
  policy->Observe(1, Commits({{12, 0.05f}, {13, 0.6f}, {14, 0.0f}}));
  CHECK(policy->Plan(Input(2, cand)).full);
  // exactly tau is not above -> partial
  policy->Observe(2, Commits({{15, 0.5f}}));
  CHECK_FALSE(policy->Plan(Input(3, cand)).full);
  // no commit: the canvas is unchanged, E counts as 0 -> partial, also right after a full step
  policy->Observe(3, {});
  CHECK_FALSE(policy->Plan(Input(4, cand)).full);
  policy->Observe(4, Commits({{16, 2.0f}}));
  CHECK(policy->Plan(Input(5, cand)).full);
  policy->Observe(5, {});
  CHECK_FALSE(policy->Plan(Input(6, cand)).full);
}

TEST_CASE("Entropy policy compares E with tau times the engine's tau scale",
          "[decoding][cache_policy]") {
  auto policy = MakeCachePolicy(testing::EntropyCache(0.5f, 2), /*vocab_size=*/512);
  const std::vector<int32_t> cand = {20, 21};
  auto scaled = [&](int step, float scale) {
    PlanInput in = Input(step, cand);
    in.tau_scale = scale;
    return policy->Plan(in).full;
  };
  CHECK(scaled(0, 100.0f));  // the first step is full whatever the scale
  policy->Observe(0, Commits({{10, 0.4f}}));
  CHECK_FALSE(scaled(1, 1.0f));  // 0.4 <= 0.5
  CHECK(scaled(1, 0.5f));        // 0.4 > 0.25: a tighter tau refreshes
  policy->Observe(1, Commits({{11, 0.9f}}));
  CHECK(scaled(2, 1.0f));        // 0.9 > 0.5
  CHECK_FALSE(scaled(2, 2.0f));  // 0.9 <= 1.0: a looser tau does not
}

TEST_CASE("TauUnderLoad: the budget's scale lowers the tau under load, never past tau",
          "[decoding][cache_policy]") {
  CHECK(TauUnderLoad(1.0f, 2.0f, 1.0f) == 2.0f);   // the switch as asked
  CHECK(TauUnderLoad(1.0f, 2.0f, 0.75f) == 1.5f);  // partly taken back
  CHECK(TauUnderLoad(1.0f, 2.0f, 0.25f) == 1.0f);  // all the way back: the request's own tau
  // A tau under load below tau (stricter under load) is kept, and still never passed.
  CHECK(TauUnderLoad(1.0f, 0.5f, 1.0f) == 0.5f);
  CHECK(TauUnderLoad(1.0f, 0.5f, 0.5f) == 0.5f);
  constexpr float kInf = std::numeric_limits<float>::infinity();
  CHECK(TauUnderLoad(-kInf, 8.0f, 0.5f) == 4.0f);
  CHECK(TauUnderLoad(1.0f, kInf, 0.01f) == kInf);  // no scale brings infinity back
}

TEST_CASE("Entropy policy under load plans with TauUnderLoad, then the engine's tau scale",
          "[decoding][cache_policy]") {
  CacheParams params = testing::EntropyCache(0.5f, 2);
  params.entropy_threshold_under_load = 2.0f;
  auto policy = MakeCachePolicy(params, /*vocab_size=*/512);
  const std::vector<int32_t> cand = {20, 21};
  auto plan = [&](int step, bool under_load, float load_scale, float scale) {
    PlanInput in = Input(step, cand);
    in.under_load = under_load;
    in.load_tau_scale = load_scale;
    in.tau_scale = scale;
    return policy->Plan(in).full;
  };
  CHECK(plan(0, true, 1.0f, 1.0f));  // the first step fills the cache
  policy->Observe(0, Commits({{10, 1.2f}}));
  CHECK(plan(1, false, 1.0f, 1.0f));        // 1.2 > 0.5
  CHECK_FALSE(plan(1, true, 1.0f, 1.0f));   // 1.2 <= 2
  CHECK(plan(1, true, 0.5f, 1.0f));         // 1.2 > 2 x 0.5
  CHECK_FALSE(plan(1, true, 0.5f, 1.25f));  // 1.2 <= 1 x 1.25
  CHECK(plan(1, true, 0.125f, 2.0f));       // 1.2 > max(0.25, 0.5) x 2
}

TEST_CASE("Entropy policy: a first step that commits nothing is followed by a partial one",
          "[decoding][cache_policy]") {
  // Dream's timestep schedule commits 0 tokens at step 0: step 0 filled the cache from the
  // very canvas step 1 sees, so refreshing again would recompute identical K/V.
  auto policy = MakeCachePolicy(testing::EntropyCache(0.5f, 4), /*vocab_size=*/512);
  const std::vector<int32_t> cand = {3, 4};
  CHECK(policy->Plan(Input(0, cand)).full);
  policy->Observe(0, {});
  CHECK_FALSE(policy->Plan(Input(1, cand)).full);
  // tau < 0 (always refresh) stays full even without commits
  auto always = MakeCachePolicy(testing::EntropyCache(-std::numeric_limits<float>::infinity(), 4),
                                /*vocab_size=*/512);
  CHECK(always->Plan(Input(0, cand)).full);
  always->Observe(0, {});
  CHECK(always->Plan(Input(1, cand)).full);
}

TEST_CASE("Entropy tau = -inf is always full, +inf never after the first",
          "[decoding][cache_policy]") {
  auto always = MakeCachePolicy(testing::EntropyCache(-std::numeric_limits<float>::infinity(), 4),
                                /*vocab_size=*/512);
  auto never = MakeCachePolicy(testing::EntropyCache(std::numeric_limits<float>::infinity(), 4),
                               /*vocab_size=*/512);
  const std::vector<int32_t> cand = {5};
  CHECK(always->Plan(Input(0, cand)).full);
  CHECK(never->Plan(Input(0, cand)).full);
  for (int step = 0; step < 5; ++step) {
    always->Observe(step, Commits({{step, 0.0f}}));
    never->Observe(step, Commits({{step, 11.0f}}));
    CHECK(always->Plan(Input(step + 1, cand)).full);
    CHECK_FALSE(never->Plan(Input(step + 1, cand)).full);
  }
}

TEST_CASE("Recent-k ranks by commit step, ties by position, newest step whole",
          "[decoding][cache_policy]") {
  CommitHistory h;
  // Figure example: positions decoded at steps t-2, t-3, t-1, t (positions 1, 2, 3, 4).
  h.Record(0, Commits({{2, 0}}));
  h.Record(1, Commits({{1, 0}}));
  h.Record(2, Commits({{3, 0}}));
  h.Record(3, Commits({{4, 0}}));
  CHECK(h.Recent(3) == std::vector<int32_t>{1, 3, 4});  // drops the one from t-3
  CHECK(h.Recent(10) == std::vector<int32_t>{1, 2, 3, 4});

  CommitHistory par;
  par.Record(0, Commits({{30, 0}, {10, 0}, {20, 0}}));  // parallel commits, any order
  par.Record(1, Commits({{50, 0}, {40, 0}}));
  CHECK(par.Recent(3) == std::vector<int32_t>{10, 40, 50});  // step 0's lowest position
  CHECK(par.Recent(4) == std::vector<int32_t>{10, 20, 40, 50});
  // k smaller than the newest step: the newest step stays whole
  CHECK(par.Recent(1) == std::vector<int32_t>{40, 50});
  CHECK(par.Recent(0) == std::vector<int32_t>{40, 50});
  CommitHistory empty;
  CHECK(empty.Recent(5).empty());
}

TEST_CASE("Recent-k with a minimum entropy keeps the newest step and the uncertain older ones",
          "[decoding][cache_policy]") {
  CommitHistory h;
  h.Record(0, Commits({{10, 0.9f}, {11, 0.05f}}));
  h.Record(1, Commits({{12, 0.5f}, {13, 0.2f}}));
  h.Record(2, Commits({{14, 0.0f}, {15, 0.01f}}));  // newest: kept whatever its entropy
  CHECK(h.Recent(6, {.min_entropy_nats = 0.0f}) == std::vector<int32_t>{10, 11, 12, 13, 14, 15});
  CHECK(h.Recent(6, {.min_entropy_nats = 0.2f}) ==
        std::vector<int32_t>{10, 12, 13, 14, 15});  // >= the floor
  CHECK(h.Recent(6, {.min_entropy_nats = 0.3f}) == std::vector<int32_t>{10, 12, 14, 15});
  // The floor filters the first k of the ranking; it never reaches past them: k = 4 ranks
  // 14, 15, 12, 13, so position 10 (step 0) is out even though it is uncertain.
  CHECK(h.Recent(4, {.min_entropy_nats = 0.3f}) == std::vector<int32_t>{12, 14, 15});
  CHECK(h.Recent(6, {.min_entropy_nats = std::numeric_limits<float>::infinity()}) ==
        std::vector<int32_t>{14, 15});

  // Through the policy: a partial step recomputes the candidates and the filtered recents.
  CacheParams c;
  c.policy = CachePolicyKind::kEntropy;
  c.entropy_threshold = 1.0f;
  c.recent_k = 6;
  c.recent_min_entropy = 0.3f;
  auto policy = MakeCachePolicy(c, /*vocab_size=*/512);
  const std::vector<int32_t> cand = {20, 21};
  REQUIRE(policy->Plan(Input(0, cand)).full);
  policy->Observe(0, Commits({{10, 0.9f}, {11, 0.05f}}));
  policy->Observe(1, Commits({{12, 0.5f}, {13, 0.2f}}));
  policy->Observe(2, Commits({{14, 0.0f}, {15, 0.01f}}));
  const StepPlan plan = policy->Plan(Input(3, cand));
  CHECK_FALSE(plan.full);
  CHECK(plan.query_positions == std::vector<int32_t>{10, 12, 14, 15, 20, 21});
}

TEST_CASE("Dual refreshes at block starts and recomputes the block", "[decoding][cache_policy]") {
  CacheParams c;
  c.policy = CachePolicyKind::kDual;
  auto policy = MakeCachePolicy(c, /*vocab_size=*/512);
  const std::vector<int32_t> cand = {12, 13};
  CHECK(policy->Plan(Input(0, cand, true, 10, 14)).full);
  StepPlan p = policy->Plan(Input(1, cand, false, 10, 14));
  CHECK_FALSE(p.full);
  CHECK(p.query_positions == std::vector<int32_t>{10, 11, 12, 13});
  CHECK(policy->Plan(Input(2, {14}, true, 14, 18)).full);
}

TEST_CASE("Prefix refreshes at block starts and recomputes the block and all after it",
          "[decoding][cache_policy]") {
  CacheParams c;
  c.policy = CachePolicyKind::kPrefix;
  auto policy = MakeCachePolicy(c, /*vocab_size=*/512);
  const std::vector<int32_t> cand = {12, 13};
  // Canvas of 18 positions (prompt 10, answer 8 in two blocks of 4).
  CHECK(policy->Plan(Input(0, cand, true, 10, 14, 18)).full);
  policy->Observe(0, Commits({{11, 3.0f}}));  // entropy plays no part
  StepPlan p = policy->Plan(Input(1, cand, false, 10, 14, 18));
  CHECK_FALSE(p.full);
  CHECK(p.query_positions == std::vector<int32_t>{10, 11, 12, 13, 14, 15, 16, 17});
  CHECK(policy->Plan(Input(2, {14}, true, 14, 18, 18)).full);
  p = policy->Plan(Input(3, {15}, false, 14, 18, 18));
  CHECK(p.query_positions == std::vector<int32_t>{14, 15, 16, 17});  // last block: = dual
  // A step after the first is partial even at position 0's block when it is not a block
  // start; step 0 is full whatever the decoder says (an empty cache).
  CHECK(MakeCachePolicy(c, /*vocab_size=*/512)->Plan(Input(0, cand, false, 10, 14, 18)).full);
}

TEST_CASE("Interval refreshes every n steps with entropy's partial step between",
          "[decoding][cache_policy]") {
  CacheParams c;
  c.policy = CachePolicyKind::kInterval;
  c.refresh_interval = 3;
  c.recent_k = 1;
  auto policy = MakeCachePolicy(c, /*vocab_size=*/512);
  const std::vector<int32_t> cand = {8, 9};
  std::vector<bool> full;
  for (int step = 0; step < 7; ++step) {
    StepPlan plan = policy->Plan(Input(step, cand));
    full.push_back(plan.full);
    if (!plan.full) CHECK(plan.query_positions == std::vector<int32_t>{step - 1, 8, 9});
    policy->Observe(step, Commits({{step, 9.0f}}));  // high entropy is ignored
  }
  CHECK(full == std::vector<bool>{true, false, false, true, false, false, true});
}

TEST_CASE("None is always full", "[decoding][cache_policy]") {
  auto policy = MakeCachePolicy(CacheParams{}, /*vocab_size=*/512);
  for (int step = 0; step < 3; ++step) {
    CHECK(policy->Plan(Input(step, {1})).full);
    policy->Observe(step, Commits({{1, 0.0f}}));
  }
}

TEST_CASE("PlanQueryRows adds row p-1 for shifted logits", "[decoding][cache_policy]") {
  StepPlan partial{false, {3, 7, 8}};
  CHECK(PlanQueryRows(partial, std::vector<int32_t>{7, 8}, 10, false) ==
        std::vector<int32_t>{3, 7, 8});
  CHECK(PlanQueryRows(partial, std::vector<int32_t>{7, 8}, 10, true) ==
        std::vector<int32_t>{3, 6, 7, 8});
  StepPlan full{true, {}};
  CHECK(PlanQueryRows(full, std::vector<int32_t>{7}, 4, true) == std::vector<int32_t>{0, 1, 2, 3});
}

}  // namespace
}  // namespace dllm

namespace dllm {
namespace {

TEST_CASE("Recent-k with a cap on end tokens keeps the newest step and the newest older ones",
          "[decoding][cache_policy]") {
  CommitHistory h;
  h.Record(0, EndCommits({60, 61}));
  h.Record(1, Commits({{10, 0.5f}}));
  h.Record(2, EndCommits({62, 63}));
  h.Record(3, EndCommits({64}));  // newest: kept although an end token
  // Ranking: 64 | 62 63 | 10 | 60 61.
  CHECK(h.Recent(6) == std::vector<int32_t>{10, 60, 61, 62, 63, 64});
  CHECK(h.Recent(6, {.max_end_tokens = 0}) == std::vector<int32_t>{10, 64});
  CHECK(h.Recent(6, {.max_end_tokens = 1}) == std::vector<int32_t>{10, 62, 64});
  CHECK(h.Recent(6, {.max_end_tokens = 3}) == std::vector<int32_t>{10, 60, 62, 63, 64});
  // The cap filters the ranking's first k; the skipped end tokens still use up k.
  CHECK(h.Recent(3, {.max_end_tokens = 0}) == std::vector<int32_t>{64});
  CHECK(h.Recent(4, {.max_end_tokens = 0}) == std::vector<int32_t>{10, 64});

  // Through the policy (interval shares the partial step): candidates plus the kept recents.
  CacheParams c;
  c.policy = CachePolicyKind::kInterval;
  c.refresh_interval = 100;
  c.recent_k = 6;
  c.recent_max_end = 0;
  auto policy = MakeCachePolicy(c, /*vocab_size=*/512);
  const std::vector<int32_t> cand = {20};
  REQUIRE(policy->Plan(Input(0, cand)).full);
  policy->Observe(0, EndCommits({60, 61}));
  policy->Observe(1, Commits({{10, 0.5f}}));
  policy->Observe(2, EndCommits({62, 63}));
  policy->Observe(3, EndCommits({64}));
  const StepPlan plan = policy->Plan(Input(4, cand));
  CHECK_FALSE(plan.full);
  CHECK(plan.query_positions == std::vector<int32_t>{10, 20, 64});
}

}  // namespace
}  // namespace dllm
