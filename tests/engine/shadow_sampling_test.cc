// The public shadow-sampling options' validation (engine/shadow_sampling.h): every field is
// checked, and the error names it.
#include "engine/shadow_sampling.h"

#include <catch2/catch.hpp>
#include <limits>
#include <string>

namespace dllm {
namespace {

TEST_CASE("Tau autotune options are validated with the field named", "[scheduler][autotune]") {
  CHECK(ValidateTauAutotuneOptions(TauAutotuneOptions{}, 0.0f).ok());
  auto message = [](TauAutotuneOptions o) {
    return std::string(ValidateTauAutotuneOptions(o, 0.0f).message());
  };
  TauAutotuneOptions o;
  o.mismatch_budget = 0;
  CHECK_THAT(message(o), Catch::Contains("mismatch_budget"));
  o = {};
  o.window_samples = 0;
  CHECK_THAT(message(o), Catch::Contains("window_samples"));
  o = {};
  o.step_factor = 1;
  CHECK_THAT(message(o), Catch::Contains("step_factor"));
  o = {};
  o.min_scale = 2;
  CHECK_THAT(message(o), Catch::Contains("min_scale"));
}

TEST_CASE("Shadow options are validated with the field named", "[shadow]") {
  CHECK(ValidateShadowOptions(ShadowOptions{}).ok());
  auto message = [](ShadowOptions o) { return std::string(ValidateShadowOptions(o).message()); };
  ShadowOptions o;
  o.sample_rate = 1.5f;
  CHECK_THAT(message(o), Catch::Contains("sample_rate"));
  o = {};
  o.sample_rate = std::numeric_limits<float>::quiet_NaN();
  CHECK_THAT(message(o), Catch::Contains("sample_rate"));
  o = {};
  o.max_time_fraction = 0;
  CHECK_THAT(message(o), Catch::Contains("max_time_fraction"));
  o = {};
  o.tau_autotune.step_factor = 1;
  CHECK_THAT(message(o), Catch::Contains("tau_autotune.step_factor"));
  o = {};
  o.tau_autotune.enabled = true;  // without samples to learn from
  CHECK_THAT(message(o), Catch::Contains("tau_autotune.enabled"));
  o.sample_rate = 0.1f;
  CHECK(ValidateShadowOptions(o).ok());
}

}  // namespace
}  // namespace dllm
