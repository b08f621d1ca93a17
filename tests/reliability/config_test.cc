// Reliability: server configuration values that used to slip through or read badly
// (issue 15, defects 3 and 13), and the TLS key/certificate pair check (defect 12).
#include "server/config.h"

#include <catch2/catch.hpp>
#include <fstream>
#include <sstream>
#include <string>

#include "server/command_line.h"
#include "server/server_flags.h"
#include "server/tls_key_pair.h"

namespace dllm {
namespace {

std::string ErrorOf(const std::string& yaml) {
  auto c = ParseServerConfig(yaml, "test.yaml");
  return c.ok() ? std::string("(accepted)") : std::string(c.status().message());
}

TEST_CASE("reliability: server.address ports are range-checked", "[reliability][config]") {
  for (const char* address : {"127.0.0.1:99999", "0.0.0.0:65536", "127.0.0.1:-1",
                              "127.0.0.1:", "127.0.0.1:80a", "[::1]:123456"}) {
    INFO(address);
    const std::string error = ErrorOf(std::string("server: {address: \"") + address + "\"}");
    CHECK_THAT(error, Catch::Contains("server.address") && Catch::Contains("port"));
  }
  for (const char* address :
       {"127.0.0.1:0", "0.0.0.0:65535", "[::]:50051", "localhost:1", "unix:/tmp/dllm.sock"}) {
    INFO(address);
    CHECK(ErrorOf(std::string("server: {address: \"") + address + "\"}") == "(accepted)");
  }
  // --port keeps working and is checked by the same rule.
  ServerConfig config;
  config.server.address = "127.0.0.1:50051";
  auto cl = ParseCommandLine({"--port", "6000"});
  REQUIRE(cl.ok());
  CHECK(ApplyCommandLine(*cl, &config).ok());
  CHECK(config.server.address == "127.0.0.1:6000");
}

TEST_CASE("reliability: config bounds print as integers", "[reliability][config]") {
  const std::string error = ErrorOf("server: {max_receive_message_bytes: 100}");
  CHECK_THAT(error, Catch::Contains("[1024, 2147483647]"));
  CHECK_THAT(error, !Catch::Contains("e+"));
  CHECK_THAT(ErrorOf("limits: {max_new_tokens: 5000000}"),
             Catch::Contains("5000000 is outside [1, 1048576]"));
  CHECK_THAT(ErrorOf("server: {drain_timeout_seconds: 4000.5}"),
             Catch::Contains("4000.5 is outside [0, 3600]"));
  CHECK_THAT(ErrorOf("limits: {max_prompt_bytes: -1}"), Catch::Contains("limits.max_prompt_bytes"));
}

// tests/data/tls: two throwaway self-signed EC certificates with their keys (test only).
TEST_CASE("reliability: TLS material that is not a matching pair is named", "[reliability][tls]") {
  const std::string dir = std::string(DLLM_TEST_DATA_DIR) + "/tls/";
  auto read = [&](const std::string& name) {
    std::ifstream in(dir + name);
    std::stringstream s;
    s << in.rdbuf();
    REQUIRE(!s.str().empty());
    return s.str();
  };
  const std::string cert_a = read("a.pem"), key_a = read("a.key"), key_b = read("b.key");
  CHECK(CheckTlsKeyPair(cert_a, "a.pem", key_a, "a.key").ok());
  const absl::Status mismatch = CheckTlsKeyPair(cert_a, "a.pem", key_b, "b.key");
  CHECK(absl::IsInvalidArgument(mismatch));
  CHECK_THAT(std::string(mismatch.message()), Catch::Contains("b.key") &&
                                                  Catch::Contains("a.pem") &&
                                                  Catch::Contains("does not match"));
  CHECK_THAT(std::string(CheckTlsKeyPair(key_a, "k.pem", key_a, "a.key").message()),
             Catch::Contains("tls.cert") && Catch::Contains("k.pem"));
  CHECK_THAT(std::string(CheckTlsKeyPair(cert_a, "a.pem", cert_a, "c.key").message()),
             Catch::Contains("tls.key") && Catch::Contains("c.key"));
}

}  // namespace
}  // namespace dllm
