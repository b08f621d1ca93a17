#include "engine/core/params.h"

#include <catch2/catch.hpp>
#include <set>
#include <string>

namespace dllm {
namespace {

template <typename E, size_t N>
void CheckTable(const std::array<E, N>& all, std::optional<E> (*parse)(std::string_view),
                const std::string& joined) {
  std::set<std::string> names;
  std::string expected_joined;
  for (E value : all) {
    const std::string name = Name(value);
    INFO(name);
    CHECK(name != "?");
    CHECK(names.insert(name).second);  // unique
    REQUIRE(parse(name).has_value());
    CHECK(*parse(name) == value);  // round trip
    if (!expected_joined.empty()) expected_joined += '|';
    expected_joined += name;
  }
  CHECK(joined == expected_joined);
  CHECK_FALSE(parse("").has_value());
  CHECK_FALSE(parse("BLOCK").has_value());  // lower case only; HTTP maps proto names itself
}

TEST_CASE("params: every enum value has one name that parses back", "[core][params]") {
  CheckTable(kAllSchedules, &ParseSchedule, ScheduleNames());
  CheckTable(kAllRemaskings, &ParseRemasking, RemaskingNames());
  CheckTable(kAllCachePolicies, &ParseCachePolicy, CachePolicyNames());
  // The spellings users type (YAML, HTTP, --policy) are part of the API.
  CHECK(CachePolicyNames() == "none|entropy|dual|interval|prefix|d2cache|elastic");
  CHECK(ScheduleNames() == "block|timestep|window");
  CHECK(RemaskingNames() == "low_confidence|random|origin|maskgit_plus|topk_margin|entropy");
  CHECK(std::string(Name(static_cast<CachePolicyKind>(99))) == "?");
}

}  // namespace
}  // namespace dllm
