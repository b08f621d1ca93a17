#include "server/grpc/tls_credentials.h"

#include <grpcpp/security/server_credentials.h>

#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "engine/core/file_text.h"
#include "server/tls_key_pair.h"

namespace dllm {
namespace {

absl::StatusOr<std::string> ReadPem(const std::string& key, const std::string& path) {
  absl::StatusOr<std::string> text = ReadFileText(path, uint64_t{1} << 20);
  if (!text.ok()) {
    return absl::Status(text.status().code(), absl::StrCat(key, ": ", text.status().message()));
  }
  if (text->find("-----BEGIN") == std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat(key, ": '", path, "' is not a PEM file"));
  }
  return text;
}

}  // namespace

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(
    const TlsSection& tls) {
  if (!tls.enabled()) return grpc::InsecureServerCredentials();
  absl::StatusOr<std::string> cert = ReadPem("tls.cert", tls.cert);
  if (!cert.ok()) return cert.status();
  absl::StatusOr<std::string> key = ReadPem("tls.key", tls.key);
  if (!key.ok()) return key.status();
  if (absl::Status st = CheckTlsKeyPair(*cert, tls.cert, *key, tls.key); !st.ok()) return st;
  grpc::SslServerCredentialsOptions options(GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  options.pem_key_cert_pairs.push_back({*key, *cert});
  if (!tls.client_ca.empty()) {
    absl::StatusOr<std::string> ca = ReadPem("tls.client_ca", tls.client_ca);
    if (!ca.ok()) return ca.status();
    options.pem_root_certs = *ca;
    options.client_certificate_request = GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY;
  }
  return grpc::SslServerCredentials(options);
}

}  // namespace dllm
