// Lists the services a server exposes through gRPC server reflection (what `grpcurl list`
// shows), without generated reflection stubs: the request and the part of the response we
// read are encoded and decoded by hand.
#ifndef DLLM_CLIENT_REFLECTION_LIST_H_
#define DLLM_CLIENT_REFLECTION_LIST_H_

#include <grpcpp/grpcpp.h>

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/connection.h"

namespace dllm::client {

// Fully qualified service names, e.g. "dllm.v1.DiffusionLM", "grpc.health.v1.Health".
// UNAVAILABLE / UNIMPLEMENTED (reflection off) / DATA_LOSS (unparseable reply) on failure.
absl::StatusOr<std::vector<std::string>> ListServices(const Connection& connection,
                                                      double timeout_seconds);

}  // namespace dllm::client

#endif  // DLLM_CLIENT_REFLECTION_LIST_H_
