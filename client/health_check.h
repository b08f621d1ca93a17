// grpc.health.v1.Health/Check without generated stubs (the two messages are one field each,
// encoded by hand), so the client needs no copy of health.proto.
#ifndef DLLM_CLIENT_HEALTH_CHECK_H_
#define DLLM_CLIENT_HEALTH_CHECK_H_

#include <grpcpp/grpcpp.h>

#include <string>

#include "client/connection.h"

namespace dllm::client {

// Returns "SERVING", "NOT_SERVING", "SERVICE_UNKNOWN", "UNKNOWN", or the gRPC error code
// name when the call itself failed (e.g. "UNAVAILABLE" while the server is unreachable).
std::string CheckHealth(const Connection& connection, const std::string& service,
                        double timeout_seconds);

}  // namespace dllm::client

#endif  // DLLM_CLIENT_HEALTH_CHECK_H_
