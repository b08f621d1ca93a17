#include "engine/scheduler/shadow/tau_controller.h"

#include <catch2/catch.hpp>

namespace dllm {
namespace {

TauAutotuneOptions Enabled(double budget, int window) {
  TauAutotuneOptions o;
  o.enabled = true;
  o.mismatch_budget = budget;
  o.window_samples = window;
  o.step_factor = 2;
  o.min_scale = 0.25;
  o.max_scale = 4;
  return o;
}

// Feeds one window with `mismatches` mismatches out of `window` samples.
bool Window(TauController& c, int window, int mismatches) {
  bool adjusted = false;
  for (int i = 0; i < window; ++i) adjusted = c.Observe(i < mismatches);
  return adjusted;
}

TEST_CASE("TauController tightens above the budget, loosens under half of it, within bounds",
          "[scheduler][autotune]") {
  TauController c(Enabled(0.1, 10));
  CHECK(c.scale() == 1.0f);
  CHECK_FALSE(c.Observe(true));  // mid-window: no change yet
  CHECK(c.scale() == 1.0f);
  CHECK(Window(c, 9, 9));  // the window closes at 10 samples, 10/10 mismatched
  CHECK(c.scale() == 0.5f);
  Window(c, 10, 2);  // 0.2 > 0.1: tighter
  CHECK(c.scale() == 0.25f);
  Window(c, 10, 5);  // clamped at min_scale
  CHECK(c.scale() == 0.25f);
  Window(c, 10, 1);  // 0.1: within [budget/2, budget], unchanged
  CHECK(c.scale() == 0.25f);
  for (int i = 0; i < 5; ++i) Window(c, 10, 0);  // 0 < 0.05: looser, up to max_scale
  CHECK(c.scale() == 4.0f);
}

TEST_CASE("TauController does nothing while disabled", "[scheduler][autotune]") {
  TauAutotuneOptions o = Enabled(0.1, 1);
  o.enabled = false;
  TauController c(o);
  for (int i = 0; i < 20; ++i) CHECK_FALSE(c.Observe(true));
  CHECK(c.scale() == 1.0f);
}

}  // namespace
}  // namespace dllm
