// The request fields' table: one row per member of DecodingParams/CacheParams, names that
// cannot collide, accessors that reach the member they name, text that reads back, and
// domains that the defaults satisfy.
#include "engine/core/param_fields.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <set>
#include <string>

#include "tests/support/param_values.h"

namespace dllm {
namespace {

std::string ErrorOf(const absl::Status& s) {
  INFO(s.ToString());
  CHECK(absl::IsInvalidArgument(s));
  return std::string(s.message());
}

using testing::SomeOtherValue;

TEST_CASE("param fields: every name and alias is unique within its section", "[core][fields]") {
  std::set<std::string> seen;
  for (const ParamField& f : ParamFields()) {
    INFO(f.FullName());
    CHECK(seen.insert(f.FullName()).second);
    if (!f.alias.empty()) {
      CHECK(seen.insert(absl::StrCat(SectionName(f.section), ".", f.alias)).second);
      CHECK(FindParamField(f.section, f.alias) == &f);
    }
    CHECK(FindParamField(f.section, f.name) == &f);
    CHECK(FindParamField(f.FullName()) == &f);
    CHECK_FALSE(f.doc.empty());
  }
  // Flat spellings (dllm-client's flags) must not collide across sections either.
  std::set<std::string> flat;
  for (const ParamField& f : ParamFields()) {
    CHECK(flat.insert(std::string(f.name)).second);
    if (!f.alias.empty()) CHECK(flat.insert(std::string(f.alias)).second);
  }
  CHECK(FindParamField("decoding.nope") == nullptr);
  CHECK(FindParamField("nope.steps") == nullptr);
  CHECK(FindParamField("steps") == nullptr);
}

TEST_CASE("param fields: the table covers the params and each row reaches its own member",
          "[core][fields]") {
  // The members by hand, as the independent list: a member missing from the table, or a row
  // writing another member, fails here.
  const std::set<std::string> expected = {"decoding.schedule",
                                          "decoding.remasking",
                                          "decoding.steps",
                                          "decoding.block_length",
                                          "decoding.window",
                                          "decoding.confidence_threshold",
                                          "decoding.temperature",
                                          "decoding.top_k",
                                          "decoding.top_p",
                                          "decoding.seed",
                                          "decoding.eps",
                                          "decoding.alg_temp",
                                          "decoding.max_denoising_steps",
                                          "cache.policy",
                                          "cache.entropy_threshold",
                                          "cache.recent_k",
                                          "cache.entropy_threshold_under_load",
                                          "cache.recent_min_entropy",
                                          "cache.recent_max_end",
                                          "cache.refresh_interval",
                                          "cache.shadow_sample_rate",
                                          "cache.d2_current_k",
                                          "cache.d2_rollout_p",
                                          "cache.d2_sigma",
                                          "cache.elastic_gamma"};
  std::set<std::string> names;
  for (const ParamField& f : ParamFields()) names.insert(f.FullName());
  CHECK(names == expected);

  for (const ParamField& f : ParamFields()) {
    INFO(f.FullName());
    DecodingParams d;
    CacheParams c;
    const ParamValue v = SomeOtherValue(f);
    f.set(v, &d, &c);
    CHECK(f.get(d, c) == std::optional<ParamValue>(v));
    // Every other field still reads its default.
    for (const ParamField& g : ParamFields()) {
      if (&g != &f) CHECK(g.get(d, c) == DefaultParamValue(g));
    }
  }
  // Spot checks against the members themselves.
  DecodingParams d;
  CacheParams c;
  FindParamField("cache.tau")->set(1.5, &d, &c);
  FindParamField("cache.d2_rollout_p")->set(0.05, &d, &c);
  FindParamField("decoding.w")->set(int64_t{16}, &d, &c);
  FindParamField("decoding.schedule")->set(int64_t{2}, &d, &c);
  CHECK(c.entropy_threshold == 1.5f);
  CHECK(c.d2_rollout_p == 0.05f);
  CHECK(d.window == 16);
  CHECK(d.schedule == Schedule::kWindow);
  CHECK_FALSE(DefaultParamValue(*FindParamField("cache.shadow_sample_rate")).has_value());
}

TEST_CASE("param fields: enum choices are params.h's names in value order", "[core][fields]") {
  const ParamField& schedule = *FindParamField("decoding.schedule");
  REQUIRE(schedule.choices.size() == kAllSchedules.size());
  for (Schedule s : kAllSchedules) CHECK(schedule.choices[static_cast<int>(s)] == Name(s));
  const ParamField& policy = *FindParamField("cache.policy");
  REQUIRE(policy.choices.size() == kAllCachePolicies.size());
  for (CachePolicyKind p : kAllCachePolicies) CHECK(policy.choices[static_cast<int>(p)] == Name(p));
  const ParamField& remasking = *FindParamField("decoding.remasking");
  for (Remasking r : kAllRemaskings) CHECK(remasking.choices[static_cast<int>(r)] == Name(r));
  CHECK(DomainText(policy) == CachePolicyNames());
}

TEST_CASE("param fields: text reads back and bad text names the field", "[core][fields]") {
  for (const ParamField& f : ParamFields()) {
    INFO(f.FullName());
    const ParamValue v = SomeOtherValue(f);
    absl::StatusOr<ParamValue> back = ParseParamText(f, FormatParamValue(f, v));
    REQUIRE(back.ok());
    CHECK(*back == v);
  }
  const ParamField& tau = *FindParamField("cache.entropy_threshold");
  CHECK(std::get<double>(*ParseParamText(tau, "inf")) == std::numeric_limits<double>::infinity());
  CHECK(std::get<double>(*ParseParamText(tau, "-inf")) == -std::numeric_limits<double>::infinity());
  CHECK(FormatParamValue(tau, 0.1) == "0.1");
  CHECK(ErrorOf(ParseParamText(tau, "x").status()) ==
        "cache.entropy_threshold: 'x' is not a number");
  CHECK(ErrorOf(ParseParamText(*FindParamField("decoding.steps"), "1.5").status()) ==
        "decoding.steps: '1.5' is not an integer");
  CHECK(ErrorOf(ParseParamText(*FindParamField("decoding.seed"), "-1").status()) ==
        "decoding.seed: '-1' is not an integer >= 0");
  CHECK(ErrorOf(ParseParamText(*FindParamField("cache.policy"), "lru").status()) ==
        "cache.policy: unknown value 'lru' (expected "
        "none|entropy|dual|interval|prefix|d2cache|elastic)");
}

TEST_CASE("param fields: defaults are inside their domains; the domains read as text",
          "[core][fields]") {
  for (const ParamField& f : ParamFields()) {
    INFO(f.FullName());
    if (std::optional<ParamValue> v = DefaultParamValue(f)) {
      CHECK(CheckParamValue(f, *v, ParamLimits{}).ok());
    }
  }
  CHECK(DomainText(*FindParamField("decoding.top_p")) == "(0, 1]");
  CHECK(DomainText(*FindParamField("decoding.eps")) == "(0, 1)");
  CHECK(DomainText(*FindParamField("decoding.steps")) == "[0, limits.max_steps]");
  CHECK(DomainText(*FindParamField("cache.d2_sigma")) == "(0, inf)");
  CHECK(DomainText(*FindParamField("cache.entropy_threshold")) == "any number but NaN");
  CHECK(DomainText(*FindParamField("cache.elastic_gamma")) == "[-1, 1]");
}

TEST_CASE("param fields: the domain check names the bound it misses", "[core][fields]") {
  ParamLimits limits;
  const ParamField& rollout = *FindParamField("cache.d2_rollout_p");
  CHECK(ErrorOf(CheckParamValue(rollout, 1.5, limits)) ==
        "cache.d2_rollout_p: 1.5 is outside [0, 1]");
  CHECK(ErrorOf(CheckParamValue(rollout, std::nan(""), limits)) ==
        "cache.d2_rollout_p: nan is outside [0, 1]");
  const ParamField& steps = *FindParamField("decoding.steps");
  limits.max_steps = 64;
  CHECK(ErrorOf(CheckParamValue(steps, int64_t{65}, limits)) ==
        "decoding.steps: 65 is outside [0, 64]");
  limits.section = "limits";
  CHECK(ErrorOf(CheckParamValue(steps, int64_t{65}, limits)) ==
        "decoding.steps: 65 exceeds limits.max_steps (64)");
  CHECK(CheckParamValue(steps, int64_t{64}, limits).ok());
  const ParamField& current_k = *FindParamField("cache.d2_current_k");
  CHECK(ErrorOf(CheckParamValue(current_k, int64_t{0}, limits)) ==
        "cache.d2_current_k: 0 is outside [1, 1048576]");
}

TEST_CASE("param overrides: set by name, typed reads, applied in place", "[core][fields]") {
  ParamOverrides o;
  CHECK(o.empty());
  REQUIRE(o.SetTo("cache.gamma", 0.8f).ok());  // an alias names the same field
  REQUIRE(o.SetTo("decoding.block_length", 16).ok());
  REQUIRE(o.SetTo("decoding.block_length", 8).ok());  // a later value replaces
  CHECK(o.values().size() == 2);
  CHECK(o.Get<float>("cache.elastic_gamma") == 0.8f);
  CHECK(o.Get<int>("decoding.block_length") == 8);
  CHECK_FALSE(o.Get<int>("decoding.steps").has_value());
  CHECK(ErrorOf(o.SetTo("cache.nope", 1)) == "cache.nope: unknown field");
  CHECK(ErrorOf(o.SetTo("decoding.steps", 1.5)) == "decoding.steps: a value of the wrong type");
  DecodingParams d;
  CacheParams c;
  o.ApplyTo(&d, &c);
  CHECK(d.block_length == 8);
  CHECK(c.elastic_gamma == 0.8f);
  CHECK(d.window == DecodingParams{}.window);
}

TEST_CASE("param overrides: setting tau alone pins it (no tau under load)", "[core][fields]") {
  CacheParams defaults;
  defaults.policy = CachePolicyKind::kEntropy;
  defaults.entropy_threshold = 1.0f;
  defaults.entropy_threshold_under_load = 2.0f;
  DecodingParams d;
  {
    CacheParams c = defaults;  // another field leaves both taus alone
    ParamOverrides o;
    REQUIRE(o.SetTo("cache.k", 8).ok());
    o.ApplyTo(&d, &c);
    CHECK(c.entropy_threshold == 1.0f);
    CHECK(c.entropy_threshold_under_load == 2.0f);
  }
  {
    CacheParams c = defaults;  // tau alone: pinned
    ParamOverrides o;
    REQUIRE(o.SetTo("cache.tau", 0.5f).ok());
    o.ApplyTo(&d, &c);
    CHECK(c.entropy_threshold == 0.5f);
    CHECK_FALSE(c.entropy_threshold_under_load.has_value());
  }
  {
    CacheParams c = defaults;  // both: both as given
    ParamOverrides o;
    REQUIRE(o.SetTo("cache.tau", 0.5f).ok());
    REQUIRE(o.SetTo("cache.load_tau", 4.0f).ok());
    o.ApplyTo(&d, &c);
    CHECK(c.entropy_threshold == 0.5f);
    CHECK(c.entropy_threshold_under_load == 4.0f);
  }
}

TEST_CASE("param overrides: another schedule starts from its plain knobs", "[core][fields]") {
  // A family's defaults: the window schedule's tuned point (window 16, threshold 0.9), with an
  // operator's block_length (a knob the window schedule does not read).
  DecodingParams tuned;
  tuned.schedule = Schedule::kWindow;
  tuned.window = 16;
  tuned.confidence_threshold = 0.9f;
  tuned.block_length = 8;
  tuned.remasking = Remasking::kEntropy;
  CHECK(DefaultsForSchedule(tuned, Schedule::kWindow).confidence_threshold == 0.9f);
  const DecodingParams block = DefaultsForSchedule(tuned, Schedule::kBlock);
  CHECK(block.schedule == Schedule::kBlock);
  CHECK(block.confidence_threshold == 0.0f);      // the window's threshold does not carry over
  CHECK(block.window == 16);                      // the window's alone: kept, harmless
  CHECK(block.block_length == 8);                 // not a window knob: kept
  CHECK(block.remasking == Remasking::kEntropy);  // every schedule reads it: kept
  // The timestep schedule refuses a threshold; the plain knobs validate.
  DecodingParams timestep = tuned;
  ParamOverrides o;
  REQUIRE(o.SetTo("decoding.schedule", Schedule::kTimestep).ok());
  CacheParams c;
  o.ApplyTo(&timestep, &c);
  CHECK(timestep.schedule == Schedule::kTimestep);
  CHECK(timestep.confidence_threshold == 0.0f);
  CHECK(ValidateParams(32, timestep, c, ParamLimits{}).ok());
  // Given with the schedule, a knob wins over the plain value.
  DecodingParams parallel = tuned;
  REQUIRE(o.SetTo("decoding.schedule", Schedule::kBlock).ok());
  REQUIRE(o.SetTo("decoding.threshold", 0.8f).ok());
  o.ApplyTo(&parallel, &c);
  CHECK(parallel.confidence_threshold == 0.8f);
  // Naming the defaults' own schedule changes nothing.
  DecodingParams same = tuned;
  ParamOverrides window;
  REQUIRE(window.SetTo("decoding.schedule", Schedule::kWindow).ok());
  window.ApplyTo(&same, &c);
  CHECK(same.window == 16);
  CHECK(same.confidence_threshold == 0.9f);
}

TEST_CASE("param overrides: a knob the request's decoding does not read is refused",
          "[core][fields]") {
  DecodingParams block;
  block.schedule = Schedule::kBlock;
  DecodingParams window;
  window.schedule = Schedule::kWindow;
  window.confidence_threshold = 0.9f;
  DecodingParams timestep;
  timestep.schedule = Schedule::kTimestep;
  ParamOverrides o;
  REQUIRE(o.SetTo("decoding.block_length", 8).ok());
  REQUIRE(o.SetTo("decoding.steps", 8).ok());  // read by a quota schedule
  CHECK(o.CheckReadBy(block).ok());
  ParamOverrides quota;
  REQUIRE(quota.SetTo("decoding.steps", 8).ok());
  CHECK(ErrorOf(quota.CheckReadBy(window)) ==
        "decoding.steps: threshold decoding (decoding.confidence_threshold > 0) commits by "
        "confidence and does not read it; set confidence_threshold 0 for a fixed quota per "
        "step");
  window.confidence_threshold = 0;  // the window with a fixed quota reads steps
  CHECK(quota.CheckReadBy(window).ok());
  CHECK(ErrorOf(o.CheckReadBy(window)) ==
        "decoding.block_length: the block schedule reads it, and this request decodes with the "
        "window schedule; set decoding.schedule, or leave the field unset");
  ParamOverrides t;
  REQUIRE(t.SetTo("decoding.threshold", 0.5f).ok());
  REQUIRE(t.SetTo("cache.k", 4).ok());  // cache fields are not the schedule's
  CHECK(t.CheckReadBy(window).ok());
  CHECK(ErrorOf(t.CheckReadBy(timestep)) ==
        "decoding.confidence_threshold: the block and window schedules read it, and this "
        "request decodes with the timestep schedule; set decoding.schedule, or leave the field "
        "unset");
  ParamOverrides steps;  // the timestep schedule reads steps whatever the threshold
  REQUIRE(steps.SetTo("decoding.steps", 8).ok());
  CHECK(steps.CheckReadBy(timestep).ok());
}

}  // namespace
}  // namespace dllm
