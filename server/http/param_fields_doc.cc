#include "server/http/param_fields_doc.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/core/param_fields.h"

namespace dllm {
namespace {

using nlohmann::json;

const char* TypeName(ParamType type) {
  switch (type) {
    case ParamType::kInt32:
      return "int32";
    case ParamType::kUint64:
      return "uint64";
    case ParamType::kFloat:
      return "float";
    case ParamType::kEnum:
      return "enum";
  }
  return "?";
}

json Bound(double x) { return std::isinf(x) ? json(nullptr) : json(x); }

json DefaultJson(const ParamField& f) {
  const std::optional<ParamValue> value = DefaultParamValue(f);
  if (!value) return nullptr;
  switch (f.type) {
    case ParamType::kEnum:
      return FormatParamValue(f, *value);
    case ParamType::kInt32:
      return std::get<int64_t>(*value);
    case ParamType::kUint64:
      return std::get<uint64_t>(*value);
    case ParamType::kFloat:
      return Bound(std::get<double>(*value));
  }
  return nullptr;
}

// Where a field applies: the policies or schedules that read it.
std::string AppliesTo(const ParamField& f) {
  std::vector<std::string> names;
  for (CachePolicyKind p : f.policies) names.emplace_back(Name(p));
  for (Schedule s : f.schedules) names.emplace_back(Name(s));
  if (f.quota_only) names.emplace_back("quota decoding (threshold 0, or timestep)");
  return names.empty() ? "all" : absl::StrJoin(names, ", ");
}

}  // namespace

json ParamFieldsJson() {
  json fields = json::array();
  for (const ParamField& f : ParamFields()) {
    json policies = json::array();
    for (CachePolicyKind p : f.policies) policies.push_back(Name(p));
    json schedules = json::array();
    for (Schedule s : f.schedules) schedules.push_back(Name(s));
    json choices = json::array();
    for (absl::string_view c : f.choices) choices.push_back(std::string(c));
    fields.push_back({{"section", std::string(SectionName(f.section))},
                      {"name", std::string(f.name)},
                      {"alias", std::string(f.alias)},
                      {"type", TypeName(f.type)},
                      {"unit", std::string(f.unit)},
                      {"domain", DomainText(f)},
                      {"min", Bound(f.lo)},
                      {"max", Bound(f.hi)},
                      {"min_open", f.lo_open},
                      {"max_open", f.hi_open},
                      {"limit", std::string(f.limit)},
                      {"doc", std::string(f.doc)},
                      {"choices", std::move(choices)},
                      {"default", DefaultJson(f)},
                      {"optional", f.optional},
                      {"quota_only", f.quota_only},
                      {"policies", std::move(policies)},
                      {"schedules", std::move(schedules)}});
  }
  return {{"fields", std::move(fields)}};
}

std::string ParamFieldsMarkdown() {
  std::string out =
      "| field | type | unit | range | default | alias | applies to | meaning |\n"
      "|---|---|---|---|---|---|---|---|\n";
  for (const ParamField& f : ParamFields()) {
    const std::optional<ParamValue> value = DefaultParamValue(f);
    // An enum's choices are joined by '|' elsewhere, which would end a Markdown cell.
    const std::string domain = f.type == ParamType::kEnum
                                   ? absl::StrCat("`", absl::StrJoin(f.choices, "`, `"), "`")
                                   : DomainText(f);
    absl::StrAppend(&out, "| `", f.FullName(), "` | ", TypeName(f.type), " | ", f.unit, " | ",
                    domain, " | ", value ? FormatParamValue(f, *value) : "unset", " | ",
                    f.alias.empty() ? "" : absl::StrCat("`", f.alias, "`"), " | ", AppliesTo(f),
                    " | ", f.doc, " |\n");
  }
  return out;
}

}  // namespace dllm
