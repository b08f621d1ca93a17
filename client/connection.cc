#include "client/connection.h"

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "engine/core/file_text.h"

namespace dllm::client {
namespace {

absl::StatusOr<std::string> ReadFile(const std::string& flag, const std::string& path) {
  absl::StatusOr<std::string> text = ReadFileText(path, uint64_t{1} << 20);
  if (!text.ok()) {
    return absl::Status(text.status().code(), absl::StrCat(flag, ": ", text.status().message()));
  }
  return text;
}

}  // namespace

absl::StatusOr<Connection> Connection::Open(const ClientOptions& o) {
  Connection c;
  c.timeout_seconds_ = o.timeout_seconds;
  if (!o.token.empty()) {
    c.token_ = o.token;
  } else if (!o.token_file.empty()) {
    absl::StatusOr<std::string> token = ReadFile("--token-file", o.token_file);
    if (!token.ok()) return token.status();
    c.token_ = std::string(absl::StripAsciiWhitespace(*token));
  } else if (const char* env = std::getenv("DLLM_TOKEN"); env != nullptr) {
    c.token_ = env;
  }
  std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::InsecureChannelCredentials();
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(64 << 20);
  if (o.tls) {
    grpc::SslCredentialsOptions ssl;
    if (!o.ca_file.empty()) {
      absl::StatusOr<std::string> ca = ReadFile("--ca", o.ca_file);
      if (!ca.ok()) return ca.status();
      ssl.pem_root_certs = *ca;
    }
    if (!o.cert_file.empty()) {
      absl::StatusOr<std::string> cert = ReadFile("--cert", o.cert_file);
      if (!cert.ok()) return cert.status();
      absl::StatusOr<std::string> key = ReadFile("--key", o.key_file);
      if (!key.ok()) return key.status();
      ssl.pem_cert_chain = *cert;
      ssl.pem_private_key = *key;
    }
    credentials = grpc::SslCredentials(ssl);
    if (!o.server_name.empty()) args.SetSslTargetNameOverride(o.server_name);
  }
  c.channel_ = grpc::CreateCustomChannel(o.address, credentials, args);
  return c;
}

void Connection::Prepare(grpc::ClientContext* context) const {
  if (!token_.empty()) context->AddMetadata("authorization", absl::StrCat("Bearer ", token_));
  if (timeout_seconds_) {
    context->set_deadline(std::chrono::system_clock::now() +
                          std::chrono::microseconds(static_cast<int64_t>(*timeout_seconds_ * 1e6)));
  }
}

}  // namespace dllm::client
