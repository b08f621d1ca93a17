// Checks that a PEM private key belongs to a PEM certificate before gRPC sees them.
//
// gRPC only discovers a mismatched pair while building the listener and then reports a bare
// "cannot listen"; this check runs at start-up with OpenSSL and names both files.
#ifndef DLLM_SERVER_TLS_KEY_PAIR_H_
#define DLLM_SERVER_TLS_KEY_PAIR_H_

#include <string>

#include "absl/status/status.h"

namespace dllm {

// OK when `key_pem` parses as a private key, `cert_pem` as an X.509 certificate (the first of
// a chain), and the key matches the certificate's public key. Otherwise INVALID_ARGUMENT
// naming `cert_path` / `key_path` and what is wrong.
absl::Status CheckTlsKeyPair(const std::string& cert_pem, const std::string& cert_path,
                             const std::string& key_pem, const std::string& key_path);

}  // namespace dllm

#endif  // DLLM_SERVER_TLS_KEY_PAIR_H_
