// The http: config section and --http-port (kept apart from config_test.cc).
#include <catch2/catch.hpp>
#include <string>

#include "server/command_line.h"
#include "server/config.h"
#include "server/server_flags.h"

namespace dllm {
namespace {

TEST_CASE("http config: off by default, parsed, range-checked") {
  const ServerConfig builtin;
  CHECK(builtin.http.port == 0);
  absl::StatusOr<ServerConfig> shipped = LoadServerConfig(DLLM_SOURCE_DIR "/config/default.yaml");
  REQUIRE(shipped.ok());
  CHECK(shipped->http.port == builtin.http.port);
  CHECK(shipped->http.address == builtin.http.address);
  CHECK(shipped->http.threads == builtin.http.threads);
  CHECK(shipped->http.max_connections == builtin.http.max_connections);
  CHECK(shipped->http.read_timeout_seconds == builtin.http.read_timeout_seconds);
  CHECK(shipped->http.head_timeout_seconds == builtin.http.head_timeout_seconds);
  CHECK(shipped->http.max_connections_per_peer == builtin.http.max_connections_per_peer);
  CHECK(shipped->http.max_buffered_body_bytes == builtin.http.max_buffered_body_bytes);
  CHECK(shipped->http.model_name == builtin.http.model_name);

  absl::StatusOr<ServerConfig> c = ParseServerConfig(
      "http: {address: 127.0.0.1, port: 8000, threads: 4, model_name: tiny, max_connections: 9, "
      "read_timeout_seconds: 7, head_timeout_seconds: 3, max_connections_per_peer: 4, "
      "max_buffered_body_bytes: 8388608}",
      "t.yaml");
  REQUIRE(c.ok());
  CHECK(c->http.address == "127.0.0.1");
  CHECK(c->http.port == 8000);
  CHECK(c->http.threads == 4);
  CHECK(c->http.model_name == "tiny");
  CHECK(c->http.max_connections == 9);
  CHECK(c->http.read_timeout_seconds == 7);
  CHECK(c->http.head_timeout_seconds == 3);
  CHECK(c->http.max_connections_per_peer == 4);
  CHECK(c->http.max_buffered_body_bytes == 8388608);

  for (const char* bad : {"http: {port: 70000}", "http: {threads: 0}", "http: {prot: 1}",
                          "http: {port: 80, address: ''}", "http: {max_connections: 0}",
                          "http: {read_timeout_seconds: 0}", "http: {threads: 257}",
                          "http: {head_timeout_seconds: 0}",
                          "http: {max_connections: 10, max_connections_per_peer: 11}",
                          "http: {max_connections_per_peer: -1}",
                          // below one largest body (server.max_receive_message_bytes, 4 MiB)
                          "http: {max_buffered_body_bytes: 1048576}"}) {
    INFO(bad);
    absl::StatusOr<ServerConfig> e = ParseServerConfig(bad, "t.yaml");
    REQUIRE_FALSE(e.ok());
    CHECK_THAT(std::string(e.status().message()), Catch::Contains("http."));
  }
}

TEST_CASE("http config: --http-port overrides the file") {
  absl::StatusOr<CommandLine> cl = ParseCommandLine({"--http-port", "8080"});
  REQUIRE(cl.ok());
  ServerConfig config;
  REQUIRE(ApplyCommandLine(*cl, &config).ok());
  CHECK(config.http.port == 8080);
  CHECK_FALSE(ParseCommandLine({"--http-port", "99999"}).ok());
  CHECK_FALSE(ParseCommandLine({"--http-port"}).ok());
}

}  // namespace
}  // namespace dllm
