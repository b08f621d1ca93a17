// The row budget per step: which planned steps wait (hand-made loads against the rule in
// engine/scheduler/row_budget.h), and, through the real worker over FakeExecutor, that a
// sequence that waited produces exactly the tokens, steps and rows it produces without a
// budget (it only ran later) while steps past the budget become rarer.
#include "engine/scheduler/row_budget.h"

#include <catch2/catch.hpp>
#include <memory>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "engine/engine_impl.h"
#include "tests/engine/decoding/entropy_cache_params.h"
#include "tests/engine/scheduler/collect_sink.h"
#include "tests/support/fake_executor.h"

namespace dllm {
namespace {

PlannedStep Full(int64_t rows, uint64_t order, int deferred = 0, bool can_defer = true) {
  return PlannedStep{rows, true, can_defer, deferred, order};
}
PlannedStep Partial(int64_t rows, uint64_t order) {
  return PlannedStep{rows, false, true, 0, order};
}

TEST_CASE("row budget: no budget, or a step within it, runs everything",
          "[scheduler][row_budget]") {
  const std::vector<PlannedStep> steps = {Full(550, 1), Partial(60, 2), Partial(60, 3)};
  CHECK(SelectWithinRowBudget(steps, 0, 4) == std::vector<bool>{true, true, true});
  CHECK(SelectWithinRowBudget(steps, 670, 4) == std::vector<bool>{true, true, true});
}

TEST_CASE("row budget: a full refresh past the budget waits; partial steps keep their pace",
          "[scheduler][row_budget]") {
  // Seven partial steps of 60 rows and one full refresh of 550: 970 rows > 512.
  std::vector<PlannedStep> steps;
  for (int i = 0; i < 7; ++i) steps.push_back(Partial(60, i + 1));
  steps.insert(steps.begin() + 3, Full(550, 10));
  std::vector<bool> expected(8, true);
  expected[3] = false;
  CHECK(SelectWithinRowBudget(steps, 512, 4) == expected);
}

TEST_CASE("row budget: the largest full step waits first, then the latest admitted",
          "[scheduler][row_budget]") {
  // 600 + 550 + 550 + 40 = 1740. Budget 1200: the 600 waits (1140 fit).
  const std::vector<PlannedStep> a = {Full(550, 1), Full(600, 2), Full(550, 3), Partial(40, 4)};
  CHECK(SelectWithinRowBudget(a, 1200, 4) == std::vector<bool>{true, false, true, true});
  // Budget 600: the 600, then of the two 550s the later (order 3) waits: 590 fit.
  CHECK(SelectWithinRowBudget(a, 600, 4) == std::vector<bool>{true, false, false, true});
}

TEST_CASE("row budget: the bound on waiting, policies that cannot replan, and progress",
          "[scheduler][row_budget]") {
  // A full step that already waited max_deferred_steps in a row runs.
  CHECK(SelectWithinRowBudget(std::vector<PlannedStep>{Full(550, 1, 4), Partial(60, 2)}, 512, 4) ==
        std::vector<bool>{true, true});
  CHECK(SelectWithinRowBudget(std::vector<PlannedStep>{Full(550, 1, 3), Partial(60, 2)}, 512, 4) ==
        std::vector<bool>{false, true});
  // A policy whose Plan has side effects (d2cache, elastic) is never deferred.
  CHECK(SelectWithinRowBudget(std::vector<PlannedStep>{Full(550, 1, 0, false), Partial(60, 2)}, 512,
                              4) == std::vector<bool>{true, true});
  // Only full steps, each past the budget alone: one still runs (the earliest admitted).
  CHECK(SelectWithinRowBudget(std::vector<PlannedStep>{Full(550, 1), Full(550, 2), Full(550, 3)},
                              512, 4) == std::vector<bool>{true, false, false});
  // Partial steps past the budget on their own are never cut.
  CHECK(SelectWithinRowBudget(std::vector<PlannedStep>{Partial(300, 1), Partial(300, 2)}, 512, 4) ==
        std::vector<bool>{true, true});
}

class StepRows final : public EngineObserver {
 public:
  explicit StepRows(int64_t budget) : budget_(budget) {}
  void OnStep(const StepInfo& info) override {
    absl::MutexLock lock(&mu_);
    deferred_ += info.deferred_sequences;
    if (info.rows > budget_) ++over_budget_;
    ++steps_;
  }
  int deferred() const {
    absl::MutexLock lock(&mu_);
    return deferred_;
  }
  int over_budget() const {
    absl::MutexLock lock(&mu_);
    return over_budget_;
  }

 private:
  const int64_t budget_;
  mutable absl::Mutex mu_;
  int deferred_ = 0, over_budget_ = 0, steps_ = 0;
};

std::vector<FinalEvent> RunAll(int64_t max_step_rows, StepRows* observer) {
  EngineOptions options;
  options.max_batch_sequences = 8;
  options.max_step_rows = max_step_rows;
  options.max_deferred_steps = 3;
  options.observer = observer;
  auto created =
      CreateEngineForTesting(options, testing::FakeConfig(false),
                             std::make_unique<testing::FakeExecutor>(options.kv_budget_bytes),
                             std::make_unique<testing::FakeTokenizer>());
  REQUIRE(created.ok());
  std::vector<std::shared_ptr<testing::CollectSink>> sinks;
  for (int i = 0; i < 12; ++i) {
    GenerationRequest r;
    for (int p = 0; p < 6 + i % 4; ++p) r.prompt_ids.push_back(20 + p);
    r.max_new_tokens = 24;
    r.decoding.block_length = 8;
    r.decoding.confidence_threshold = i % 2 == 0 ? 0.0f : 0.5f;
    if (i % 3 == 0) {
      r.cache.policy = CachePolicyKind::kDual;
    } else {
      r.cache = testing::EntropyCache(i % 3 == 1 ? 0.5f : 1.5f, 3);
    }
    sinks.push_back(std::make_shared<testing::CollectSink>());
    REQUIRE((*created)->Submit(r, sinks.back()).ok());
  }
  std::vector<FinalEvent> out;
  for (auto& s : sinks) out.push_back(s->Wait());
  return out;
}

TEST_CASE("row budget: waiting changes no token, step or row, only when steps run",
          "[scheduler][row_budget]") {
  constexpr int64_t kBudget = 60;  // fewer rows than four full refreshes of these canvases
  StepRows unlimited(kBudget), budgeted(kBudget);
  const std::vector<FinalEvent> free_run = RunAll(0, &unlimited);
  const std::vector<FinalEvent> capped = RunAll(kBudget, &budgeted);
  REQUIRE(free_run.size() == capped.size());
  for (size_t i = 0; i < capped.size(); ++i) {
    INFO("request " << i);
    REQUIRE(capped[i].status.ok());
    CHECK(capped[i].token_ids == free_run[i].token_ids);
    CHECK(capped[i].stats.steps == free_run[i].stats.steps);
    CHECK(capped[i].stats.full_steps == free_run[i].stats.full_steps);
    CHECK(capped[i].stats.rows_computed == free_run[i].stats.rows_computed);
  }
  CHECK(unlimited.deferred() == 0);
  CHECK(budgeted.deferred() > 0);
  CHECK(budgeted.over_budget() < unlimited.over_budget());
}

}  // namespace
}  // namespace dllm
