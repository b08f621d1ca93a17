#define CATCH_CONFIG_MAIN
#include "cli/flags.h"

#include <catch2/catch.hpp>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "absl/flags/flag.h"

ABSL_FLAG(int, max_new_tokens, 64, "an int flag with a dashed spelling");
ABSL_FLAG(std::optional<double>, rate, std::nullopt, "an optional flag");
ABSL_FLAG(std::string, name, "default", "a string flag");
ABSL_FLAG(bool, json, false, "a bool flag");
ABSL_FLAG(double, budget, std::numeric_limits<double>::infinity(), "a default that is inf");

namespace dllm::cli {
namespace {

// Parses `args` and returns what the flags hold during `read`.
struct Values {
  ParsedArgs parsed;
  int max_new_tokens = 0;
  std::optional<double> rate;
  std::string name;
  bool json = false;
  double budget = 0;
};

Values Read(const ParsedArgs& parsed) {
  return {parsed,
          absl::GetFlag(FLAGS_max_new_tokens),
          absl::GetFlag(FLAGS_rate),
          absl::GetFlag(FLAGS_name),
          absl::GetFlag(FLAGS_json),
          absl::GetFlag(FLAGS_budget)};
}

Values Parse(const std::vector<std::string>& args, const std::vector<std::string>& repeated = {}) {
  Values v;
  absl::Status st = ParseFlags(args, repeated, [&v](const ParsedArgs& parsed) {
    v = Read(parsed);
    return absl::OkStatus();
  });
  INFO(st.message());
  REQUIRE(st.ok());
  return v;
}

std::string Error(const std::vector<std::string>& args,
                  const std::vector<std::string>& repeated = {}) {
  bool read = false;
  absl::Status st = ParseFlags(args, repeated, [&read](const ParsedArgs&) {
    read = true;
    return absl::OkStatus();
  });
  REQUIRE_FALSE(st.ok());
  CHECK(st.code() == absl::StatusCode::kInvalidArgument);
  CHECK_FALSE(read);
  return std::string(st.message());
}

TEST_CASE("cli flags: --name=value and --name value, dashes for underscores") {
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"--max-new-tokens", "8"}, {"--max-new-tokens=8"}, {"--max_new_tokens", "8"}}) {
    CHECK(Parse(args).max_new_tokens == 8);
  }
  const Values v = Parse({"--rate=0.5", "--name", "-x", "--json"});
  CHECK(v.rate == 0.5);
  CHECK(v.name == "-x");  // a value may start with '-'
  CHECK(v.json);
  CHECK_FALSE(Parse({"--json=false"}).json);
  CHECK(Parse({"--name", "a", "--name", "b"}).name == "b");  // a plain flag: the last one wins
}

TEST_CASE("cli flags: the flags hold the values only during read") {
  Parse({"--max-new-tokens", "8", "--rate", "1", "--name", "x", "--json", "--budget", "2"});
  Error({"--name", "y", "--max-new-tokens", "x"});  // also after an error
  const auto at_defaults = [] {
    CHECK(absl::GetFlag(FLAGS_max_new_tokens) == 64);
    CHECK_FALSE(absl::GetFlag(FLAGS_rate).has_value());
    CHECK(absl::GetFlag(FLAGS_name) == "default");
    CHECK_FALSE(absl::GetFlag(FLAGS_json));
    CHECK(absl::GetFlag(FLAGS_budget) == std::numeric_limits<double>::infinity());
  };
  at_defaults();
  const Values v = Parse({});
  CHECK(v.max_new_tokens == 64);
  CHECK(v.name == "default");
  // read's own error is returned, and the flags are restored after it too.
  absl::Status st = ParseFlags({"--json"}, {}, [](const ParsedArgs&) {
    CHECK(absl::GetFlag(FLAGS_json));
    return absl::InvalidArgumentError("from read");
  });
  CHECK(st.message() == "from read");
  at_defaults();
}

TEST_CASE("cli flags: positional arguments, single dashes and --") {
  const Values v = Parse({"generate", "--json", "-3 + 4", "--", "--name", "x", "-h"});
  CHECK(v.parsed.positional == std::vector<std::string>{"generate", "-3 + 4", "--name", "x", "-h"});
  CHECK(v.name == "default");  // after "--" nothing is a flag
  CHECK_FALSE(v.parsed.help);
}

TEST_CASE("cli flags: -h and --help anywhere before -- ask for help") {
  CHECK(Parse({"load", "--help"}).parsed.help);
  CHECK(Parse({"-h", "--bogus"}).parsed.help);
  CHECK(Parse({"--bogus", "--help"}).parsed.help);
}

TEST_CASE("cli flags: an optional flag's empty value is refused, never taken as unset") {
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{"--rate", ""}, {"--rate="}}) {
    CHECK(Error(args) == "--rate: empty value (leave the flag out for its default)");
  }
  // A plain string flag takes "" as a value (gRPC health's whole-server service name is "").
  CHECK(Parse({"--name", ""}).name.empty());
  CHECK(Parse({"--name="}).name.empty());
}

TEST_CASE("cli flags: errors name the flag as written") {
  CHECK(Error({"--bogus"}) == "unknown flag '--bogus'");
  CHECK(Error({"--max-new-token=3"}) == "unknown flag '--max-new-token'");
  CHECK(Error({"--max-new-tokens"}) == "--max-new-tokens: missing value");
  CHECK(Error({"x", "--name"}) == "--name: missing value");
  const std::string bad = Error({"--max-new-tokens", "many"});
  CHECK(bad.find("--max-new-tokens: ") == 0);
  CHECK(bad.find("'many'") != std::string::npos);
  CHECK(Error({"--json=maybe"}).find("--json: ") == 0);
  CHECK(Error({"--rate", "fast"}).find("--rate: ") == 0);
  CHECK(Error({"--policy", "none"}) == "unknown flag '--policy'");  // not declared repeated
}

// Abseil's own parsing keeps only the last occurrence (every value is parsed into a fresh
// copy of the default), and its std::vector<std::string> flags split on commas: repeated
// options whose values contain commas are collected by ParseFlags instead.
TEST_CASE("cli flags: repeated options keep every value, commas and all") {
  const Values v =
      Parse({"--policy", "none", "--decoding=window:w=4,threshold=0.01", "--json",
             "--policy=entropy:tau=0.5,k=32", "--max-new-tokens", "8", "--policy", "dual"},
            {"policy", "decoding"});
  CHECK(v.parsed.repeated.at("policy") ==
        std::vector<std::string>{"none", "entropy:tau=0.5,k=32", "dual"});
  CHECK(v.parsed.repeated.at("decoding") == std::vector<std::string>{"window:w=4,threshold=0.01"});
  CHECK(v.json);
  CHECK(v.max_new_tokens == 8);
  CHECK(Parse({"--json"}, {"policy"}).parsed.repeated.count("policy") == 0);
  CHECK(Parse({"--shadow-out", "a"}, {"shadow-out"}).parsed.repeated.at("shadow-out") ==
        std::vector<std::string>{"a"});
  CHECK(Error({"--json", "--policy"}, {"policy"}) == "--policy: missing value");
}

}  // namespace
}  // namespace dllm::cli
