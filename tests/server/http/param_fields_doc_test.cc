// docs/api.md's field table is the request fields' table (engine/core/param_fields.h) as
// rendered by ParamFieldsMarkdown; GET /v1/dllm/fields serves the same rows as JSON.
// DLLM_UPDATE_DOCS=1 rewrites the doc's table instead of failing (then review the diff).
#include "server/http/param_fields_doc.h"

#include <catch2/catch.hpp>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "engine/core/param_fields.h"

namespace dllm {
namespace {

constexpr char kBegin[] =
    "<!-- request-fields:begin (generated; see tests/server/http/param_fields_doc_test.cc) -->\n";
constexpr char kEnd[] = "<!-- request-fields:end -->";

TEST_CASE("param fields: docs/api.md holds the table's Markdown", "[fields]") {
  const std::string path = DLLM_SOURCE_DIR "/docs/api.md";
  std::string doc;
  {
    std::ifstream in(path);
    REQUIRE(in);
    std::stringstream text;
    text << in.rdbuf();
    doc = text.str();
  }
  const size_t begin = doc.find(kBegin);
  const size_t end = doc.find(kEnd);
  REQUIRE(begin != std::string::npos);
  REQUIRE(end != std::string::npos);
  const size_t from = begin + std::string(kBegin).size();
  const std::string shown = doc.substr(from, end - from);
  const std::string expected = ParamFieldsMarkdown();
  if (shown != expected && std::getenv("DLLM_UPDATE_DOCS") != nullptr) {
    std::ofstream(path) << doc.substr(0, from) << expected << doc.substr(end);
    WARN("rewrote the field table of " << path);
    return;
  }
  INFO("expected (run the test with DLLM_UPDATE_DOCS=1 to write it):\n" << expected);
  CHECK(shown == expected);
}

TEST_CASE("param fields: the JSON lists every field with its domain and default", "[fields]") {
  const nlohmann::json j = ParamFieldsJson();
  REQUIRE(j["fields"].size() == ParamFields().size());
  size_t i = 0;
  for (const ParamField& f : ParamFields()) {
    const nlohmann::json& row = j["fields"][i++];
    INFO(row.dump());
    CHECK(row["name"] == std::string(f.name));
    CHECK(row["section"] == std::string(SectionName(f.section)));
    CHECK(row["domain"] == DomainText(f));
  }
  const nlohmann::json* tau_row = nullptr;
  for (const nlohmann::json& row : j["fields"])
    if (row["name"] == "entropy_threshold") tau_row = &row;
  REQUIRE(tau_row != nullptr);
  const nlohmann::json& tau = *tau_row;
  CHECK(tau["name"] == "entropy_threshold");
  CHECK(tau["default"] == 0.5);
  CHECK(tau["min"].is_null());  // -inf
  CHECK(tau["policies"] == nlohmann::json::array({"entropy"}));
  CHECK(j["fields"][0]["choices"] == nlohmann::json::array({"block", "timestep", "window"}));
}

}  // namespace
}  // namespace dllm
