#include "engine/core/params.h"

#include <array>

namespace dllm {
namespace {

template <typename E>
struct Named {
  E value;
  const char* name;
};

constexpr std::array<Named<Schedule>, 3> kSchedules = {{
    {Schedule::kBlock, "block"},
    {Schedule::kTimestep, "timestep"},
    {Schedule::kWindow, "window"},
}};
constexpr std::array<Named<Remasking>, 6> kRemaskings = {{
    {Remasking::kLowConfidence, "low_confidence"},
    {Remasking::kRandom, "random"},
    {Remasking::kOrigin, "origin"},
    {Remasking::kMaskgitPlus, "maskgit_plus"},
    {Remasking::kTopkMargin, "topk_margin"},
    {Remasking::kEntropy, "entropy"},
}};
constexpr std::array<Named<CachePolicyKind>, kAllCachePolicies.size()> kCachePolicies = {{
    {CachePolicyKind::kNone, "none"},
    {CachePolicyKind::kEntropy, "entropy"},
    {CachePolicyKind::kDual, "dual"},
    {CachePolicyKind::kInterval, "interval"},
    {CachePolicyKind::kPrefix, "prefix"},
    {CachePolicyKind::kD2Cache, "d2cache"},
    {CachePolicyKind::kElastic, "elastic"},
}};

template <typename E, size_t N>
const char* NameIn(const std::array<Named<E>, N>& table, E value) {
  for (const auto& entry : table)
    if (entry.value == value) return entry.name;
  return "?";
}

template <typename E, size_t N>
std::optional<E> ValueIn(const std::array<Named<E>, N>& table, std::string_view name) {
  for (const auto& entry : table)
    if (name == entry.name) return entry.value;
  return std::nullopt;
}

template <typename E, size_t N>
std::string JoinedNames(const std::array<Named<E>, N>& table) {
  std::string out;
  for (const auto& entry : table) {
    if (!out.empty()) out += '|';
    out += entry.name;
  }
  return out;
}

// The tables list every value of kAll* in the same order (params_test checks the names).
static_assert(kSchedules.size() == kAllSchedules.size());
static_assert(kRemaskings.size() == kAllRemaskings.size());
static_assert(kCachePolicies.size() == kAllCachePolicies.size());

}  // namespace

const char* Name(Schedule value) { return NameIn(kSchedules, value); }
const char* Name(Remasking value) { return NameIn(kRemaskings, value); }
const char* Name(CachePolicyKind value) { return NameIn(kCachePolicies, value); }

std::optional<Schedule> ParseSchedule(std::string_view name) { return ValueIn(kSchedules, name); }
std::optional<Remasking> ParseRemasking(std::string_view name) {
  return ValueIn(kRemaskings, name);
}
std::optional<CachePolicyKind> ParseCachePolicy(std::string_view name) {
  return ValueIn(kCachePolicies, name);
}

std::string ScheduleNames() { return JoinedNames(kSchedules); }
std::string RemaskingNames() { return JoinedNames(kRemaskings); }
std::string CachePolicyNames() { return JoinedNames(kCachePolicies); }

}  // namespace dllm
