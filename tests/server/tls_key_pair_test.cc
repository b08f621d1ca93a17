// CheckTlsKeyPair: TLS material that is not a matching certificate/key pair is refused at
// start-up with both files named (the hostile probe's defect 12).
#include "server/tls_key_pair.h"

#include <catch2/catch.hpp>
#include <fstream>
#include <sstream>
#include <string>

namespace dllm {
namespace {

// tests/data/tls: two throwaway self-signed EC certificates with their keys (test only).
TEST_CASE("tls: TLS material that is not a matching pair is named", "[tls][reliability]") {
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
