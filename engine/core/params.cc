#include "engine/core/params.h"

#include <array>
#include <type_traits>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "engine/core/enum_names.h"
#include "engine/core/param_fields.h"
#include "engine/core/shortest_decimal.h"
#include "engine/core/status_macros.h"

namespace dllm {
namespace {

constexpr std::array<EnumName<Schedule>, 3> kSchedules = {{
    {Schedule::kBlock, "block"},
    {Schedule::kTimestep, "timestep"},
    {Schedule::kWindow, "window"},
}};
constexpr std::array<EnumName<Remasking>, 6> kRemaskings = {{
    {Remasking::kLowConfidence, "low_confidence"},
    {Remasking::kRandom, "random"},
    {Remasking::kOrigin, "origin"},
    {Remasking::kMaskgitPlus, "maskgit_plus"},
    {Remasking::kTopkMargin, "topk_margin"},
    {Remasking::kEntropy, "entropy"},
}};
constexpr std::array<EnumName<CachePolicyKind>, kAllCachePolicies.size()> kCachePolicies = {{
    {CachePolicyKind::kNone, "none"},
    {CachePolicyKind::kEntropy, "entropy"},
    {CachePolicyKind::kDual, "dual"},
    {CachePolicyKind::kInterval, "interval"},
    {CachePolicyKind::kPrefix, "prefix"},
    {CachePolicyKind::kD2Cache, "d2cache"},
    {CachePolicyKind::kElastic, "elastic"},
}};

// The tables list every value of kAll* in the same order (params_test checks the names).
static_assert(kSchedules.size() == kAllSchedules.size());
static_assert(kRemaskings.size() == kAllRemaskings.size());
static_assert(kCachePolicies.size() == kAllCachePolicies.size());

absl::Status Invalid(absl::string_view field, absl::string_view reason) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", reason));
}

// A value in a message: floats with enough digits to show how they miss a bound
// (1.0000001, not "1", which would contradict "is outside (0, 1]").
template <typename T>
std::string Num(T value) {
  if constexpr (std::is_floating_point_v<T>) {
    return ShortestDecimal(value);
  } else {
    return absl::StrCat(value);
  }
}

// Inclusive range that also refuses NaN. `bound` names hi where it is a configured limit
// ("max_steps" with section "limits"); an excess then names the limit, not the range.
template <typename T>
absl::Status InRange(absl::string_view field, T value, T lo, T hi, const ParamLimits& limits,
                     absl::string_view bound = {}) {
  if (value >= lo && value <= hi) return absl::OkStatus();
  if (!bound.empty() && !limits.section.empty() && value > hi) {
    return Invalid(field, absl::StrCat(Num(value), " exceeds ", limits.section, ".", bound, " (",
                                       Num(hi), ")"));
  }
  return Invalid(field, absl::StrCat(Num(value), " is outside [", Num(lo), ", ", Num(hi), "]"));
}

}  // namespace

absl::Status ValidateParamFields(const DecodingParams& decoding, const CacheParams& cache,
                                 const ParamLimits& limits) {
  for (const ParamField& field : ParamFields()) {
    const std::optional<ParamValue> value = field.get(decoding, cache);
    if (value) DLLM_RETURN_IF_ERROR(CheckParamValue(field, *value, limits));
  }
  return absl::OkStatus();
}

absl::Status ValidateMaxNewTokens(int max_new_tokens, const ParamLimits& limits) {
  return InRange("max_new_tokens", max_new_tokens, 1, limits.max_new_tokens, limits,
                 "max_new_tokens");
}

absl::Status ValidateParams(int max_new_tokens, const DecodingParams& p, const CacheParams& c,
                            const ParamLimits& l) {
  DLLM_RETURN_IF_ERROR(ValidateMaxNewTokens(max_new_tokens, l));
  DLLM_RETURN_IF_ERROR(ValidateParamFields(p, c, l));
  const int gen = max_new_tokens;
  if (p.remasking == Remasking::kOrigin && p.schedule != Schedule::kTimestep) {
    return Invalid("decoding.remasking", "origin requires decoding.schedule timestep");
  }
  const bool threshold_mode = p.confidence_threshold > 0;
  switch (p.schedule) {
    case Schedule::kBlock: {
      if (p.block_length > gen) {
        return Invalid("decoding.block_length",
                       absl::StrCat(p.block_length, " exceeds max_new_tokens (", gen, ")"));
      }
      if (gen % p.block_length != 0) {
        return Invalid("decoding.block_length",
                       absl::StrCat(p.block_length, " must divide max_new_tokens (", gen, ")"));
      }
      const int blocks = gen / p.block_length;
      const int steps = p.steps > 0 ? p.steps : gen;
      if (!threshold_mode && steps % blocks != 0) {
        return Invalid("decoding.steps",
                       absl::StrCat(steps, " must be a multiple of the number of blocks (", blocks,
                                    " = ", gen, " / ", p.block_length, ")"));
      }
      break;
    }
    case Schedule::kTimestep:
      if (threshold_mode) {
        return Invalid("decoding.confidence_threshold",
                       "applies to the block and window schedules only; set it to 0 for the "
                       "timestep schedule");
      }
      break;
    case Schedule::kWindow:
      break;
  }
  if ((c.policy == CachePolicyKind::kDual || c.policy == CachePolicyKind::kPrefix) &&
      p.schedule != Schedule::kBlock) {
    return Invalid("cache.policy", absl::StrCat(Name(c.policy),
                                                " requires decoding.schedule block (it refreshes "
                                                "at block starts)"));
  }
  return absl::OkStatus();
}

const char* Name(Schedule value) { return NameOf(kSchedules, value); }
const char* Name(Remasking value) { return NameOf(kRemaskings, value); }
const char* Name(CachePolicyKind value) { return NameOf(kCachePolicies, value); }

std::optional<Schedule> ParseSchedule(std::string_view name) { return ValueOf(kSchedules, name); }
std::optional<Remasking> ParseRemasking(std::string_view name) {
  return ValueOf(kRemaskings, name);
}
std::optional<CachePolicyKind> ParseCachePolicy(std::string_view name) {
  return ValueOf(kCachePolicies, name);
}

std::string ScheduleNames() { return JoinedNames(kSchedules); }
std::string RemaskingNames() { return JoinedNames(kRemaskings); }
std::string CachePolicyNames() { return JoinedNames(kCachePolicies); }

}  // namespace dllm
