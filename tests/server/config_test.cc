#include "server/config.h"

#include <catch2/catch.hpp>
#include <string>

#include "server/command_line.h"
#include "server/server_flags.h"

namespace dllm {
namespace {

std::string ErrorOf(const std::string& yaml) {
  absl::StatusOr<ServerConfig> c = ParseServerConfig(yaml, "test.yaml");
  REQUIRE_FALSE(c.ok());
  CHECK(c.status().code() == absl::StatusCode::kInvalidArgument);
  return std::string(c.status().message());
}

TEST_CASE("config: shipped default.yaml parses and matches the built-in defaults") {
  absl::StatusOr<ServerConfig> c = LoadServerConfig(DLLM_SOURCE_DIR "/config/default.yaml");
  REQUIRE(c.ok());
  const ServerConfig builtin;
  CHECK(c->server.address == builtin.server.address);
  CHECK(c->server.drain_timeout_seconds == builtin.server.drain_timeout_seconds);
  CHECK(c->server.max_connection_age_seconds == builtin.server.max_connection_age_seconds);
  CHECK(c->engine.model == "models/llada-tiny");
  CHECK(c->engine.backend == BackendKind::kCpu);
  CHECK(c->engine.queue_capacity == builtin.engine.queue_capacity);
  CHECK(c->engine.refuse_late_requests == builtin.engine.refuse_late_requests);
  CHECK(c->engine.tau_switch_slack_ratio == builtin.engine.tau_switch_slack_ratio);
  CHECK(c->limits.max_new_tokens == builtin.limits.max_new_tokens);
  CHECK(c->limits.allowed_cache_policies == builtin.limits.allowed_cache_policies);
  CHECK(c->metrics.port == builtin.metrics.port);
  CHECK_FALSE(c->decoding.max_new_tokens.has_value());  // the model's own default
  CHECK_FALSE(c->decoding.fields.Get<int>("decoding.steps").has_value());
  CHECK_FALSE(c->cache.fields.Get<CachePolicyKind>("cache.policy").has_value());
  CHECK(c->cache.shadow_max_time_fraction == builtin.cache.shadow_max_time_fraction);
  CHECK_FALSE(c->tls.enabled());
  CHECK_FALSE(c->auth.enabled());
}

TEST_CASE("config: empty document gives defaults") {
  absl::StatusOr<ServerConfig> c = ParseServerConfig("", "empty.yaml");
  REQUIRE(c.ok());
  CHECK(c->server.address == "0.0.0.0:50051");
  CHECK(c->cache.shadow_max_time_fraction == 0.02);
}

TEST_CASE("config: values are read into typed fields") {
  absl::StatusOr<ServerConfig> c = ParseServerConfig(R"(
server: {address: "127.0.0.1:1234", threads: 3, drain_timeout_seconds: 2.5, warmup: false}
engine: {backend: cuda, model: /m, max_batch_sequences: 4, kv_budget_bytes: 123456789012,
         queue_capacity: 2, refuse_late_requests: false, tau_switch_slack_ratio: 2.5,
         cpu_threads: 1}
decoding: {schedule: window, remasking: topk_margin, steps: 16, confidence_threshold: 0.9,
           seed: 18446744073709551615}
cache: {policy: interval, refresh_interval: 4, shadow_sample_rate: 0.25,
        shadow_max_time_fraction: 0.5}
limits: {max_steps: 64, max_shadow_sample_rate: 0.5, allowed_cache_policies: [none, interval]}
metrics: {port: 0}
logging: {level: debug, format: json}
)",
                                                     "t.yaml");
  REQUIRE(c.ok());
  CHECK(c->server.address == "127.0.0.1:1234");
  CHECK(c->server.threads == 3);
  CHECK(c->server.drain_timeout_seconds == 2.5);
  CHECK_FALSE(c->engine.refuse_late_requests);
  CHECK(c->engine.tau_switch_slack_ratio == 2.5);
  CHECK_FALSE(c->server.warmup);
  CHECK(c->engine.backend == BackendKind::kCuda);
  CHECK(c->engine.kv_budget_bytes == 123456789012);
  CHECK(c->decoding.fields.Get<Schedule>("decoding.schedule") == Schedule::kWindow);
  CHECK(c->decoding.fields.Get<Remasking>("decoding.remasking") == Remasking::kTopkMargin);
  CHECK(c->decoding.fields.Get<int>("decoding.steps") == 16);
  CHECK(c->decoding.fields.Get<uint64_t>("decoding.seed") == 18446744073709551615ull);
  CHECK(c->cache.fields.Get<CachePolicyKind>("cache.policy") == CachePolicyKind::kInterval);
  CHECK(c->cache.shadow_sample_rate == 0.25f);
  CHECK(c->cache.shadow_max_time_fraction == 0.5);
  CHECK_FALSE(c->cache.autotune.enabled);
  CHECK(c->limits.max_shadow_sample_rate == 0.5f);
  CHECK(c->limits.allowed_cache_policies ==
        std::vector<CachePolicyKind>{CachePolicyKind::kNone, CachePolicyKind::kInterval});
  CHECK(c->metrics.port == 0);
  CHECK(c->logging.level == LogLevel::kDebug);
  CHECK(c->logging.format == LogFormat::kJson);
}

TEST_CASE("config: errors name the key and the reason") {
  CHECK_THAT(ErrorOf("server: {adress: x}"),
             Catch::Contains("server.adress: unknown key") && Catch::Contains("test.yaml"));
  CHECK_THAT(ErrorOf("srv: {}"), Catch::Contains("srv: unknown key"));
  CHECK_THAT(ErrorOf("engine: {max_batch_sequences: many}"),
             Catch::Contains("engine.max_batch_sequences: expected an integer, got 'many'"));
  CHECK_THAT(ErrorOf("engine: {max_batch_sequences: 0}"),
             Catch::Contains("engine.max_batch_sequences"));
  CHECK_THAT(ErrorOf("engine: {backend: tpu}"),
             Catch::Contains("engine.backend: unknown value 'tpu' (expected cpu|cuda)"));
  CHECK_THAT(ErrorOf("server: {warmup: yes please}"), Catch::Contains("server.warmup"));
  CHECK_THAT(ErrorOf("server: {address: nowhere}"), Catch::Contains("server.address"));
  CHECK_THAT(ErrorOf("server: [1, 2]"), Catch::Contains("server: expected a mapping"));
  CHECK_THAT(ErrorOf("tls: {cert: /a.pem}"), Catch::Contains("tls.key"));
  CHECK_THAT(ErrorOf("tls: {client_ca: /ca.pem}"), Catch::Contains("tls.client_ca"));
  CHECK_THAT(ErrorOf("limits: {max_steps: 10}\ndecoding: {steps: 20}"),
             Catch::Contains("decoding.steps"));
  CHECK_THAT(ErrorOf("limits: {allowed_cache_policies: [none]}\ncache: {policy: entropy}"),
             Catch::Contains("cache.policy"));
  CHECK_THAT(ErrorOf("limits: {allowed_cache_policies: [none, fast]}"),
             Catch::Contains("limits.allowed_cache_policies[1]: unknown value 'fast'"));
  CHECK_THAT(ErrorOf("metrics: {port: 70000}"), Catch::Contains("metrics.port"));
  CHECK_THAT(
      ErrorOf("cache: {shadow_sample_rate: 1.5}"),
      Catch::Contains("cache.shadow_sample_rate: 1.5 exceeds limits.max_shadow_sample_rate"));
  CHECK_THAT(
      ErrorOf("cache: {shadow_sample_rate: 0.25}"),
      Catch::Contains("cache.shadow_sample_rate: 0.25 exceeds limits.max_shadow_sample_rate"));
  CHECK_THAT(ErrorOf("cache: {shadow_max_time_fraction: 0}"),
             Catch::Contains("cache.shadow_max_time_fraction: must be > 0"));
  CHECK_THAT(ErrorOf("cache: {shadow_max_time_fraction: -0.5}"),
             Catch::Contains("cache.shadow_max_time_fraction: must be > 0"));
  CHECK_THAT(ErrorOf("limits: {max_shadow_sample_rate: 2}"),
             Catch::Contains("limits.max_shadow_sample_rate"));
  CHECK_THAT(ErrorOf("cache: {autotune: {enabled: true}}"),
             Catch::Contains("cache.autotune.enabled") && Catch::Contains("shadow_sample_rate"));
  CHECK_THAT(ErrorOf("cache: {autotune: {mismatch_budget: 0}}"),
             Catch::Contains("cache.autotune") && Catch::Contains("mismatch_budget"));
  CHECK_THAT(ErrorOf("cache: {autotune: {window: 5}}"), Catch::Contains("cache.autotune.window"));
  CHECK_THAT(ErrorOf("server: {address: [unclosed"), Catch::Contains("YAML syntax error"));
  CHECK_THAT(ErrorOf("decoding: {top_p: 0}"), Catch::Contains("decoding.top_p"));
  CHECK_THAT(ErrorOf("engine: {model: }"), Catch::Contains("engine.model: has no value"));
}

TEST_CASE("config: missing file is NOT_FOUND naming the path") {
  absl::StatusOr<ServerConfig> c = LoadServerConfig("/nonexistent/dllm.yaml");
  REQUIRE_FALSE(c.ok());
  CHECK(c.status().code() == absl::StatusCode::kNotFound);
  CHECK_THAT(std::string(c.status().message()), Catch::Contains("/nonexistent/dllm.yaml"));
}

TEST_CASE("command line: flags parse and override the file") {
  absl::StatusOr<CommandLine> cl =
      ParseCommandLine({"--config", "x.yaml", "--model=/models/dream", "--port", "6000",
                        "--backend", "cuda", "--metrics-port=0"});
  REQUIRE(cl.ok());
  CHECK(cl->config_path == "x.yaml");
  ServerConfig config;
  config.server.address = "127.0.0.1:50051";
  REQUIRE(ApplyCommandLine(*cl, &config).ok());
  CHECK(config.engine.model == "/models/dream");
  CHECK(config.server.address == "127.0.0.1:6000");
  CHECK(config.engine.backend == BackendKind::kCuda);
  CHECK(config.metrics.port == 0);
  // The flags are read once and return to their defaults: a second parse starts afresh.
  absl::StatusOr<CommandLine> again = ParseCommandLine({"--http-port=8080"});
  REQUIRE(again.ok());
  CHECK_FALSE(again->model.has_value());
  CHECK_FALSE(again->port.has_value());
  CHECK(again->http_port == 8080);
}

TEST_CASE("command line: bad flags are rejected with the flag's name") {
  auto error = [](const std::vector<std::string>& args) {
    absl::StatusOr<CommandLine> cl = ParseCommandLine(args);
    REQUIRE_FALSE(cl.ok());
    return std::string(cl.status().message());
  };
  CHECK_THAT(error({"--prot", "1"}), Catch::Contains("--prot"));
  CHECK_THAT(error({"--port", "99999"}), Catch::Contains("--port"));
  CHECK_THAT(error({"--port"}), Catch::Contains("--port: missing value"));
  CHECK_THAT(error({"--backend", "gpu"}), Catch::Contains("--backend"));
  CHECK(ParseCommandLine({"--help"})->help);
}

TEST_CASE("config: server.address ports are range-checked", "[config][reliability]") {
  for (const char* address : {"127.0.0.1:99999", "0.0.0.0:65536", "127.0.0.1:-1",
                              "127.0.0.1:", "127.0.0.1:80a", "[::1]:123456"}) {
    INFO(address);
    const std::string error = ErrorOf(std::string("server: {address: \"") + address + "\"}");
    CHECK_THAT(error, Catch::Contains("server.address") && Catch::Contains("port"));
  }
  for (const char* address :
       {"127.0.0.1:0", "0.0.0.0:65535", "[::]:50051", "localhost:1", "unix:/tmp/dllm.sock"}) {
    INFO(address);
    CHECK(
        ParseServerConfig(std::string("server: {address: \"") + address + "\"}", "test.yaml").ok());
  }
  // --port keeps working and is checked by the same rule.
  ServerConfig config;
  config.server.address = "127.0.0.1:50051";
  auto cl = ParseCommandLine({"--port", "6000"});
  REQUIRE(cl.ok());
  CHECK(ApplyCommandLine(*cl, &config).ok());
  CHECK(config.server.address == "127.0.0.1:6000");
}

TEST_CASE("config: config bounds print as integers", "[config][reliability]") {
  const std::string error = ErrorOf("server: {max_receive_message_bytes: 100}");
  CHECK_THAT(error, Catch::Contains("[1024, 2147483647]"));
  CHECK_THAT(error, !Catch::Contains("e+"));
  CHECK_THAT(ErrorOf("limits: {max_new_tokens: 5000000}"),
             Catch::Contains("5000000 is outside [1, 1048576]"));
  CHECK_THAT(ErrorOf("engine: {tau_switch_slack_ratio: -1}"),
             Catch::Contains("engine.tau_switch_slack_ratio: -1 is outside [0, 1000]"));
  CHECK_THAT(ErrorOf("server: {drain_timeout_seconds: 4000.5}"),
             Catch::Contains("4000.5 is outside [0, 3600]"));
  CHECK_THAT(ErrorOf("server: {max_connection_age_seconds: -1}"),
             Catch::Contains("server.max_connection_age_seconds"));
  {
    absl::StatusOr<ServerConfig> aged =
        ParseServerConfig("server: {max_connection_age_seconds: 7}", "t.yaml");
    REQUIRE(aged.ok());
    CHECK(aged->server.max_connection_age_seconds == 7);
  }
  CHECK_THAT(ErrorOf("limits: {max_prompt_bytes: -1}"), Catch::Contains("limits.max_prompt_bytes"));
}

}  // namespace
}  // namespace dllm
