// Builds gRPC server credentials from the `tls:` config section.
#ifndef DLLM_SERVER_GRPC_TLS_CREDENTIALS_H_
#define DLLM_SERVER_GRPC_TLS_CREDENTIALS_H_

#include <grpcpp/security/server_credentials.h>

#include <memory>

#include "absl/status/statusor.h"
#include "server/config.h"

namespace dllm {

// Plaintext (insecure) credentials when TLS is off. With tls.client_ca set, clients must
// present a certificate signed by that CA (mutual TLS). NOT_FOUND names an unreadable file;
// INVALID_ARGUMENT names both files when the key does not match the certificate.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(
    const TlsSection& tls);

}  // namespace dllm

#endif  // DLLM_SERVER_GRPC_TLS_CREDENTIALS_H_
