// Explains why gRPC could not listen on an address.
//
// grpc::ServerBuilder::BuildAndStart only returns null when a port cannot be bound; this
// probe binds the same host:port itself so that the start-up error can say why
// ("Address already in use", "Cannot assign requested address", ...).
#ifndef DLLM_SERVER_LISTEN_PROBE_H_
#define DLLM_SERVER_LISTEN_PROBE_H_

#include <string>

namespace dllm {

// A short reason why binding `address` (host:port, host may be [IPv6]) fails now, or an
// empty string when it binds (then the failure was elsewhere, e.g. in TLS set-up).
std::string ListenFailureReason(const std::string& address);

}  // namespace dllm

#endif  // DLLM_SERVER_LISTEN_PROBE_H_
