#include "server/logger.h"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <sstream>

namespace dllm {
namespace {

TEST_CASE("logger: text lines quote values that need it") {
  std::ostringstream out;
  Logger logger(LogLevel::kInfo, LogFormat::kText, &out);
  logger.Info("request_done", {{"id", std::string("a1")},
                               {"error", std::string("bad \"x\" = 1")},
                               {"steps", int64_t{12}},
                               {"ratio", 0.25},
                               {"ok", true}});
  const std::string line = out.str();
  CHECK_THAT(line, Catch::Contains(
                       " INFO request_done id=a1 error=\"bad \\\"x\\\" = 1\" steps=12 ratio=0.25 "
                       "ok=true\n"));
  CHECK(std::count(line.begin(), line.end(), '\n') == 1);
}

TEST_CASE("logger: json lines parse and keep field order; levels filter") {
  std::ostringstream out;
  Logger logger(LogLevel::kWarning, LogFormat::kJson, &out);
  logger.Info("dropped");
  logger.Warning("request_done", {{"id", std::string("line\nbreak")}, {"steps", int64_t{3}}});
  const std::string text = out.str();
  REQUIRE(std::count(text.begin(), text.end(), '\n') == 1);
  const auto j = nlohmann::json::parse(text);
  CHECK(j["level"] == "WARNING");
  CHECK(j["event"] == "request_done");
  CHECK(j["id"] == "line\nbreak");
  CHECK(j["steps"] == 3);
  CHECK(text.find("\"event\"") < text.find("\"id\""));
}

}  // namespace
}  // namespace dllm
