#define CATCH_CONFIG_MAIN
#include "client/client_options.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <string>
#include <vector>

#include "client/client_flags.h"

namespace dllm::client {
namespace {

ClientOptions Parse(const std::vector<std::string>& args) {
  absl::StatusOr<ClientOptions> o = ParseClientOptions(args);
  INFO(o.status().message());
  REQUIRE(o.ok());
  return *std::move(o);
}

std::string Error(const std::vector<std::string>& args) {
  absl::StatusOr<ClientOptions> o = ParseClientOptions(args);
  REQUIRE_FALSE(o.ok());
  return std::string(o.status().message());
}

TEST_CASE("client options: options may come before or after the command") {
  const ClientOptions after = Parse({"generate", "--address", "h:1", "--json", "hi"});
  const ClientOptions before = Parse({"--address", "h:1", "--json", "generate", "hi"});
  const ClientOptions mixed = Parse({"--address=h:1", "generate", "--json", "hi"});
  for (const ClientOptions* o : {&after, &before, &mixed}) {
    CHECK(o->command == "generate");
    CHECK(o->address == "h:1");
    CHECK(o->json);
    REQUIRE(o->prompt.has_value());
    CHECK(*o->prompt == "hi");
  }
  // An option's value is never taken for the command.
  const ClientOptions valued = Parse({"--prompt", "health", "generate"});
  CHECK(valued.command == "generate");
  CHECK(*valued.prompt == "health");
  CHECK(Parse({"--token", "t", "health"}).command == "health");
}

TEST_CASE("client options: errors name the problem") {
  CHECK(Error({}) == "missing command");
  CHECK(Error({"--json"}) == "missing command");
  CHECK(Error({"--address", "h:1", "generat"}) == "unknown command 'generat'");
  CHECK(Error({"generate", "a", "b"}) == "more than one prompt given");
  CHECK(Error({"generate", "--bogus"}) == "unknown flag '--bogus'");
  CHECK(Error({"--address"}) == "--address: missing value");
  CHECK(Error({"generate", "--cert", "c"}) == "--cert and --key must be given together");
  CHECK(Error({"load", "--concurrency", "100000"}) == "--concurrency: must be in [1, 1024]");
  CHECK(Error({"load", "--concurrency", "0"}) == "--concurrency: must be in [1, 1024]");
  CHECK(Error({"load", "--duration", "-1"}) == "--duration: must be a positive number of seconds");
  CHECK(Error({"load", "--duration", "nan"}) == "--duration: must be a positive number of seconds");
  CHECK(Error({"generate", "--timeout", "0"}) == "--timeout: must be a positive number of seconds");
  CHECK(Error({"load", "--requests", "-3"}) == "--requests: must be >= 1");
}

TEST_CASE("client options: generation options are typed") {
  const ClientOptions o =
      Parse({"stream", "--max-new-tokens", "16", "--threshold=0.9", "--cache", "prefix"});
  CHECK(o.command == "stream");
  CHECK(o.max_new_tokens == 16);
  CHECK(o.params.Get<float>("decoding.confidence_threshold") == 0.9f);
  CHECK(o.params.Get<CachePolicyKind>("cache.policy") == CachePolicyKind::kPrefix);
  CHECK(Error({"generate", "--max-new-tokens", "x"}).find("--max-new-tokens") == 0);
  CHECK(Parse({"load"}).requests == 10);  // load's default when neither bound is given
}

TEST_CASE("client options: every request field is a flag, by name or alias") {
  const ClientOptions o = Parse({"generate", "--d2-rollout-p", "0.05", "--d2_current_k=16",
                                 "--sigma", "4", "--gamma=0.8", "--tau", "inf", "--k", "64",
                                 "--policy", "elastic", "--schedule", "window", "--w", "16"});
  CHECK(o.params.Get<float>("cache.d2_rollout_p") == 0.05f);
  CHECK(o.params.Get<int>("cache.d2_current_k") == 16);
  CHECK(o.params.Get<float>("cache.d2_sigma") == 4.0f);
  CHECK(o.params.Get<float>("cache.elastic_gamma") == 0.8f);
  CHECK(std::isinf(*o.params.Get<float>("cache.entropy_threshold")));
  CHECK(o.params.Get<int>("cache.recent_k") == 64);
  CHECK(o.params.Get<CachePolicyKind>("cache.policy") == CachePolicyKind::kElastic);
  CHECK(o.params.Get<Schedule>("decoding.schedule") == Schedule::kWindow);
  CHECK(o.params.Get<int>("decoding.window") == 16);
  CHECK_FALSE(o.params.Get<float>("decoding.top_p").has_value());
  CHECK(Error({"generate", "--gamma", "x"}) == "--gamma: cache.elastic_gamma: 'x' is not a number");
  CHECK(Error({"generate", "--cache", "lru"}) ==
        "--cache: cache.policy: unknown value 'lru' (expected "
        "none|entropy|dual|interval|prefix|d2cache|elastic)");
  // The usage text lists every field with its range, from the same table.
  const std::string usage = ClientUsage();
  CHECK(usage.find("--d2-rollout-p (--rollout-p) [0, 1]") != std::string::npos);
  CHECK(usage.find("--elastic-gamma (--gamma) [-1, 1]") != std::string::npos);
}

TEST_CASE("client options: flags are Abseil flags read once, defaults restored") {
  const ClientOptions o = Parse({"generate", "--address=h:1", "--max_new_tokens", "8", "--tls",
                                 "--seed", "7", "--ids", "1,2", "--", "--json"});
  CHECK(o.address == "h:1");
  CHECK(o.max_new_tokens == 8);  // the flag's own name (underscores) works too
  CHECK(o.tls);
  CHECK(o.params.Get<uint64_t>("decoding.seed") == 7u);
  CHECK(o.ids == std::vector<int32_t>{1, 2});
  CHECK(*o.prompt == "--json");  // after "--" everything is positional
  CHECK_FALSE(o.json);
  // The next parse starts from the defaults again.
  const ClientOptions d = Parse({"generate"});
  CHECK(d.address == "localhost:50051");
  CHECK_FALSE(d.max_new_tokens.has_value());
  CHECK_FALSE(d.tls);
  CHECK(Parse({"generate", "--ca", "ca.pem"}).tls);  // a CA implies TLS
  CHECK(Parse({"generate", "--tls=false"}).tls == false);
  CHECK(Error({"generate", "--tls=maybe"}).find("--tls: ") == 0);
  CHECK(Error({"generate", "--ids", "1,x"}) == "--ids: '1,x' is not a comma-separated id list");
}

TEST_CASE("client options: FinishClientOptions takes the command and prompt, then checks") {
  absl::StatusOr<ClientOptions> o = FinishClientOptions(ClientOptions(), {"load", "hi"});
  REQUIRE(o.ok());
  CHECK(o->command == "load");
  CHECK(o->prompt == "hi");
  CHECK(o->requests == 10);
  ClientOptions bad;
  bad.concurrency = 0;
  CHECK(FinishClientOptions(bad, {"load"}).status().message() ==
        "--concurrency: must be in [1, 1024]");
}

TEST_CASE("client options: -h and --help before \"--\" ask for the usage") {
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"load", "--help"}, {"generate", "-h"}, {"--help"}, {"--bogus", "-h"}}) {
    CHECK(Parse(args).help);
  }
  CHECK_FALSE(Parse({"generate", "--", "-h"}).help);
}

}  // namespace
}  // namespace dllm::client
