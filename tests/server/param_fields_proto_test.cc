// The hand-written proto against the request fields' table (engine/core/param_fields.h): field
// by field (name, type, presence, the unit and "Range" of each comment), enum value by enum
// value; then every field through each surface that reads it: gRPC, HTTP JSON and YAML.
#include <catch2/catch.hpp>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "engine/core/param_fields.h"
#include "proto/param_proto.h"
#include "server/config.h"
#include "server/http/http_openai_mapping.h"
#include "server/request_mapping.h"
#include "tests/support/param_values.h"

namespace dllm {
namespace {

using google::protobuf::FieldDescriptor;
using testing::SomeOtherValue;

FieldDescriptor::CppType CppTypeOf(ParamType type) {
  switch (type) {
    case ParamType::kInt32:
      return FieldDescriptor::CPPTYPE_INT32;
    case ParamType::kUint64:
      return FieldDescriptor::CPPTYPE_UINT64;
    case ParamType::kFloat:
      return FieldDescriptor::CPPTYPE_FLOAT;
    case ParamType::kEnum:
      return FieldDescriptor::CPPTYPE_ENUM;
  }
  return FieldDescriptor::CPPTYPE_STRING;
}

// The comment lines directly above each field of `message` in the proto file, by field name.
std::map<std::string, std::string> FieldComments(const std::string& proto_text,
                                                 const std::string& message) {
  std::map<std::string, std::string> out;
  bool inside = false;
  std::string comment;
  for (absl::string_view line : absl::StrSplit(proto_text, '\n')) {
    line = absl::StripAsciiWhitespace(line);
    if (!inside) {
      inside = line == absl::StrCat("message ", message, " {");
      continue;
    }
    if (line == "}") break;
    if (absl::ConsumePrefix(&line, "//")) {
      absl::StrAppend(&comment, absl::StripAsciiWhitespace(line), " ");
      continue;
    }
    // "optional float d2_rollout_p = 7;" or "Schedule schedule = 1;"
    std::vector<std::string> words = absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (words.size() >= 3 && words[words.size() - 2] == "=") {
      out[words[words.size() - 3]] = comment;
    }
    comment.clear();
  }
  return out;
}

TEST_CASE("param fields: the proto has every table field with its type and presence", "[fields]") {
  for (const ParamField& f : ParamFields()) {
    INFO(f.FullName());
    const FieldDescriptor* fd = ProtoFieldOf(f);
    REQUIRE(fd != nullptr);
    CHECK(fd->cpp_type() == CppTypeOf(f.type));
    CHECK_FALSE(fd->is_repeated());
    // Unset must be distinguishable from zero: proto3 optional, or an enum with UNSPECIFIED.
    if (f.type == ParamType::kEnum) {
      CHECK(fd->enum_type()->value(0)->number() == 0);
      CHECK(absl::EndsWith(fd->enum_type()->value(0)->name(), "_UNSPECIFIED"));
    } else {
      CHECK(fd->has_presence());
    }
  }
  // And nothing the table lacks.
  for (const auto* message : {v1::DecodingOptions::descriptor(), v1::CacheOptions::descriptor()}) {
    const ParamSection section = message == v1::DecodingOptions::descriptor()
                                     ? ParamSection::kDecoding
                                     : ParamSection::kCache;
    for (int i = 0; i < message->field_count(); ++i) {
      INFO(message->name() << "." << message->field(i)->name());
      const ParamField* f = FindParamField(section, message->field(i)->name());
      REQUIRE(f != nullptr);
      CHECK(f->name == message->field(i)->name());
    }
  }
}

TEST_CASE("param fields: each proto enum value is one engine choice and back", "[fields]") {
  for (const ParamField& f : ParamFields()) {
    if (f.type != ParamType::kEnum) continue;
    INFO(f.FullName());
    const auto* type = ProtoFieldOf(f)->enum_type();
    CHECK(static_cast<size_t>(type->value_count()) == f.choices.size() + 1);  // + UNSPECIFIED
    for (absl::string_view choice : f.choices) {
      const auto* value = ProtoEnumValue(*type, choice);
      REQUIRE(value != nullptr);
      CHECK(EngineEnumName(*value) == choice);
    }
  }
  CHECK(ToProto(CachePolicyKind::kD2Cache) == v1::CACHE_POLICY_D2CACHE);
  CHECK(ToProto(Remasking::kTopkMargin) == v1::REMASKING_TOPK_MARGIN);
  CHECK(FromProto(v1::SCHEDULE_WINDOW) == Schedule::kWindow);
  CHECK_FALSE(FromProto(static_cast<v1::CachePolicy>(99)).has_value());
}

TEST_CASE("param fields: each proto comment states the field's unit and range", "[fields]") {
  std::ifstream in(DLLM_SOURCE_DIR "/proto/dllm/v1/dllm.proto");
  REQUIRE(in);
  std::stringstream text;
  text << in.rdbuf();
  const auto decoding = FieldComments(text.str(), "DecodingOptions");
  const auto cache = FieldComments(text.str(), "CacheOptions");
  for (const ParamField& f : ParamFields()) {
    if (f.type == ParamType::kEnum) continue;  // its enum's values are its documentation
    INFO(f.FullName());
    const auto& comments = f.section == ParamSection::kDecoding ? decoding : cache;
    REQUIRE(comments.count(std::string(f.name)));
    const std::string& comment = comments.at(std::string(f.name));
    INFO(comment);
    CHECK(comment.find(absl::StrCat("Range ", DomainText(f))) != std::string::npos);
    if (!f.unit.empty()) CHECK(comment.find(std::string(f.unit)) != std::string::npos);
  }
}

ModelInfo TestModel() {
  ModelInfo m;
  m.family = "llada";
  m.vocab_size = 1000;
  m.default_decoding.block_length = 32;
  return m;
}

// Limits that admit SomeOtherValue of every field (the default max_shadow_sample_rate is 0.1).
LimitsSection WideLimits() {
  LimitsSection l;
  l.max_shadow_sample_rate = 1.0f;
  return l;
}

TEST_CASE("param fields: every field reaches the engine over gRPC", "[fields]") {
  const ModelInfo model = TestModel();
  const RequestDefaults defaults = ResolveRequestDefaults(model, {}, {});
  for (const ParamField& f : ParamFields()) {
    INFO(f.FullName());
    v1::GenerateRequest r;
    r.set_prompt("hi");
    r.set_max_new_tokens(12);
    const ParamValue v = SomeOtherValue(f);
    // A schedule's knob goes with a schedule that reads it (others refuse it).
    if (!f.schedules.empty()) r.mutable_decoding()->set_schedule(ToProto(f.schedules.back()));
    SetProtoParam(f, v, r.mutable_decoding(), r.mutable_cache());
    absl::StatusOr<GenerationRequest> g = ToGenerationRequest(r, defaults, WideLimits(), model);
    INFO(g.status().ToString());
    REQUIRE(g.ok());
    CHECK(f.get(g->decoding, g->cache) == std::optional<ParamValue>(v));
  }
  // The d2Cache and Elastic-Cache knobs, bounded like every field.
  v1::GenerateRequest r;
  r.set_prompt("hi");
  r.mutable_cache()->set_d2_rollout_p(1.5f);
  absl::StatusOr<GenerationRequest> g = ToGenerationRequest(r, defaults, {}, model);
  REQUIRE_FALSE(g.ok());
  CHECK(g.status().message() == "cache.d2_rollout_p: 1.5 is outside [0, 1]");
  r.mutable_cache()->clear_d2_rollout_p();
  r.mutable_cache()->set_elastic_gamma(-2.0f);
  g = ToGenerationRequest(r, defaults, {}, model);
  REQUIRE_FALSE(g.ok());
  CHECK(g.status().message() == "cache.elastic_gamma: -2 is outside [-1, 1]");
}

nlohmann::json JsonOf(const ParamField& f, const ParamValue& v) {
  if (f.type == ParamType::kEnum) return FormatParamValue(f, v);
  return std::visit([](auto x) { return nlohmann::json(x); }, v);
}

TEST_CASE("param fields: every field is read from HTTP JSON by its one name", "[fields]") {
  for (const ParamField& f : ParamFields()) {
    INFO(f.FullName());
    const ParamValue v = SomeOtherValue(f);
    nlohmann::json body = {{"model", "m"}, {"prompt", "hi"}};
    body[std::string(SectionName(f.section))][std::string(f.name)] = JsonOf(f, v);
    absl::StatusOr<OpenAiRequest> r = ParseOpenAiRequest(OpenAiEndpoint::kCompletions, body.dump());
    INFO(r.status().ToString());
    REQUIRE(r.ok());
    absl::StatusOr<std::optional<ParamValue>> got =
        GetProtoParam(f, r->request.decoding(), r->request.cache());
    REQUIRE(got.ok());
    CHECK(*got == std::optional<ParamValue>(v));
    if (!f.alias.empty()) {  // aliases are for command lines; JSON has one spelling
      nlohmann::json aliased = {{"model", "m"}, {"prompt", "hi"}};
      aliased[std::string(SectionName(f.section))][std::string(f.alias)] = JsonOf(f, v);
      absl::StatusOr<OpenAiRequest> refused =
          ParseOpenAiRequest(OpenAiEndpoint::kCompletions, aliased.dump());
      REQUIRE_FALSE(refused.ok());
      CHECK(refused.status().message() ==
            absl::StrCat(SectionName(f.section), ".", f.alias, ": unknown field"));
    }
  }
  // Enums also by their proto names.
  absl::StatusOr<OpenAiRequest> r = ParseOpenAiRequest(
      OpenAiEndpoint::kCompletions,
      R"({"model":"m","prompt":"hi","cache":{"policy":"CACHE_POLICY_D2CACHE"}})");
  REQUIRE(r.ok());
  CHECK(r->request.cache().policy() == v1::CACHE_POLICY_D2CACHE);
}

TEST_CASE("param fields: every field is a YAML default of its section", "[fields]") {
  for (const ParamField& f : ParamFields()) {
    // In the config, cache.shadow_sample_rate is the engine-wide rate (config_test covers it).
    if (f.FullName() == "cache.shadow_sample_rate") continue;
    INFO(f.FullName());
    const ParamValue v = SomeOtherValue(f);
    const std::string yaml =
        absl::StrCat(SectionName(f.section), ": {", f.name, ": ", FormatParamValue(f, v), "}\n",
                     "limits: {max_shadow_sample_rate: 1}\n");
    absl::StatusOr<ServerConfig> c = ParseServerConfig(yaml, "t.yaml");
    INFO(yaml << c.status().ToString());
    REQUIRE(c.ok());
    const RequestDefaults d = ResolveRequestDefaults(TestModel(), c->decoding, c->cache);
    CHECK(f.get(d.decoding, d.cache) == std::optional<ParamValue>(v));
  }
  absl::StatusOr<ServerConfig> bad = ParseServerConfig("cache: {d2_sigma: 0}\n", "t.yaml");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message() == "t.yaml: cache.d2_sigma: 0 must be positive and finite");
  bad = ParseServerConfig("cache: {tau: 1}\n", "t.yaml");  // YAML has one spelling too
  REQUIRE_FALSE(bad.ok());
  CHECK(absl::StrContains(bad.status().message(), "t.yaml: cache.tau: unknown key"));
}

}  // namespace
}  // namespace dllm
