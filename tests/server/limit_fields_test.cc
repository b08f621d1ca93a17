// The limits: table (server/limit_fields.h) against the proto's Limits message, field by
// field, and each row through every place that reads it: YAML, the range check, the engine's
// bounds (ToParamLimits) and GetModelInfo.
#include "server/limit_fields.h"

#include <catch2/catch.hpp>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "dllm/v1/dllm.pb.h"
#include "server/config.h"
#include "server/response_mapping.h"

namespace dllm {
namespace {

using google::protobuf::FieldDescriptor;

FieldDescriptor::CppType CppTypeOf(const LimitField& f) {
  if (std::holds_alternative<int LimitsSection::*>(f.member)) return FieldDescriptor::CPPTYPE_INT32;
  if (std::holds_alternative<int64_t LimitsSection::*>(f.member)) {
    return FieldDescriptor::CPPTYPE_INT64;
  }
  return FieldDescriptor::CPPTYPE_FLOAT;
}

double ProtoValue(const v1::Limits& limits, const FieldDescriptor* field) {
  const auto* r = limits.GetReflection();
  switch (field->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32:
      return r->GetInt32(limits, field);
    case FieldDescriptor::CPPTYPE_INT64:
      return static_cast<double>(r->GetInt64(limits, field));
    default:
      return r->GetFloat(limits, field);
  }
}

// YAML text of `value`: integral values without an exponent (an int field refuses "1e+06").
std::string Yaml(double value) {
  if (value == static_cast<double>(static_cast<int64_t>(value))) {
    return absl::StrCat(static_cast<int64_t>(value));
  }
  return absl::StrCat(value);
}

TEST_CASE("the proto's Limits message has one field per row, of the row's type") {
  const auto* message = v1::Limits::descriptor();
  std::set<std::string> rows;
  for (const LimitField& f : LimitFields()) {
    INFO(f.name);
    rows.insert(std::string(f.name));
    const FieldDescriptor* field = message->FindFieldByName(std::string(f.name));
    REQUIRE(field != nullptr);
    CHECK(field->cpp_type() == CppTypeOf(f));
    CHECK_FALSE(field->is_repeated());
  }
  CHECK(rows.size() == LimitFields().size());
  for (int i = 0; i < message->field_count(); ++i) {
    const std::string name = message->field(i)->name();
    if (name == "allowed_cache_policies") continue;  // the one bound that is not a row
    INFO(name);
    CHECK(rows.count(name) == 1);
  }
}

TEST_CASE("each limit is read from YAML, range-checked and reported by GetModelInfo") {
  for (const LimitField& f : LimitFields()) {
    INFO(f.name);
    // The top of the range: accepted, and unlike every default.
    const std::string value = Yaml(f.max);
    auto config = ParseServerConfig(absl::StrCat("limits:\n  ", f.name, ": ", value, "\n"), "t");
    REQUIRE(config.ok());
    CHECK(LimitValue(config->limits, f) == f.max);
    CHECK(LimitValue(LimitsSection{}, f) != f.max);

    v1::GetModelInfoResponse info;
    FillModelInfo(ModelInfo{}, BackendKind::kCpu, RequestDefaults{}, config->limits, &info);
    const double reported =
        ProtoValue(info.limits(), v1::Limits::descriptor()->FindFieldByName(std::string(f.name)));
    if (CppTypeOf(f) == FieldDescriptor::CPPTYPE_FLOAT) {
      CHECK(reported == static_cast<double>(static_cast<float>(f.max)));
    } else {
      CHECK(reported == f.max);
    }

    for (double outside : {f.min - 1, f.max + 1}) {
      auto bad =
          ParseServerConfig(absl::StrCat("limits:\n  ", f.name, ": ", Yaml(outside), "\n"), "t");
      REQUIRE_FALSE(bad.ok());
      CHECK(bad.status().message().find(absl::StrCat("limits.", f.name)) != std::string::npos);
    }
  }
}

TEST_CASE("ToParamLimits carries the request bounds to the engine's, and only those") {
  LimitsSection l;
  l.max_new_tokens = 11;
  l.max_steps = 12;
  l.max_block_length = 13;
  l.max_window = 14;
  l.max_temperature = 1.5f;
  l.max_shadow_sample_rate = 0.25f;
  l.allowed_cache_policies = {CachePolicyKind::kEntropy};
  const ParamLimits p = ToParamLimits(l, /*vocab_size=*/99);
  CHECK(p.max_new_tokens == 11);
  CHECK(p.max_steps == 12);
  CHECK(p.max_block_length == 13);
  CHECK(p.max_window == 14);
  CHECK(p.max_temperature == 1.5f);
  CHECK(p.max_shadow_sample_rate == 0.25f);
  CHECK(p.vocab_size == 99);
  CHECK(p.allowed_cache_policies == std::vector<CachePolicyKind>{CachePolicyKind::kEntropy});
  CHECK(p.section == "limits");
}

}  // namespace
}  // namespace dllm
