#include "engine/scheduler/shadow/shadow_budget.h"

#include <catch2/catch.hpp>
#include <limits>
#include <vector>

namespace dllm {
namespace {

// The steps (0-based) at which a shadow drawn on every step actually runs.
std::vector<int> ShadowSteps(ShadowBudget& budget, int steps, double step_s, double shadow_s) {
  std::vector<int> ran;
  for (int i = 0; i < steps; ++i) {
    const bool run = budget.allows();
    if (run) ran.push_back(i);
    budget.Record(step_s, run ? shadow_s : 0.0);
  }
  return ran;
}

TEST_CASE("ShadowBudget: a shadow waits until the steps have paid for it", "[shadow][budget]") {
  // 2 s shadows at 25% of 1 s steps: 8 steps repay one (exact in binary). The first is free,
  // the second waits for 8 more steps, then one runs every 8 steps: exactly 25%.
  ShadowBudget budget(0.25);
  CHECK(ShadowSteps(budget, 30, 1.0, 2.0) == std::vector<int>{0, 9, 17, 25});
}

TEST_CASE("ShadowBudget: credit saved up while nothing is drawn buys one shadow at most",
          "[shadow][budget]") {
  ShadowBudget budget(0.25);
  for (int i = 0; i < 100; ++i) budget.Record(1.0, 0.0);
  CHECK(budget.allows());
  budget.Record(1.0, 2.0);
  CHECK_FALSE(budget.allows());  // 100 steps before any shadow bought only the first
  for (int i = 0; i < 100; ++i) budget.Record(1.0, 0.0);
  // 100 steps would pay for 12 shadows; the cap keeps one in reserve, so two run back to back.
  CHECK(ShadowSteps(budget, 3, 1.0, 2.0) == std::vector<int>{0, 1});
}

TEST_CASE("ShadowBudget: shadow time stays within the fraction plus one shadow",
          "[shadow][budget]") {
  for (double fraction : {0.01, 0.02, 0.1, 0.5}) {
    ShadowBudget budget(fraction);
    double step_total = 0, shadow_total = 0, longest = 0;
    uint32_t x = 12345;  // varied step and shadow times, as on a real machine
    for (int i = 0; i < 20000; ++i) {
      x = x * 1664525u + 1013904223u;
      const double step_s = 0.001 + (x >> 8) % 1000 * 1e-5;    // 1-11 ms
      const double shadow_s = 0.005 + (x >> 18) % 100 * 4e-4;  // 5-45 ms
      const bool run = budget.allows();
      budget.Record(step_s, run ? shadow_s : 0.0);
      step_total += step_s;
      if (run) {
        shadow_total += shadow_s;
        longest = std::max(longest, shadow_s);
      }
    }
    INFO("fraction " << fraction << ": shadow " << shadow_total << " s of " << step_total);
    CHECK(shadow_total <= fraction * step_total + 2 * longest);
    // Drawn on every step, the budget is used, not merely respected.
    CHECK(shadow_total >= 0.8 * fraction * step_total);
  }
}

TEST_CASE("ShadowBudget: infinity never holds a shadow back", "[shadow][budget]") {
  ShadowBudget budget(std::numeric_limits<double>::infinity());
  CHECK(ShadowSteps(budget, 10, 0.0, 5.0).size() == 10);  // zero-length steps too
}

}  // namespace
}  // namespace dllm
