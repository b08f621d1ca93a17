// The canonical upper-case name of a gRPC status code ("OK", "RESOURCE_EXHAUSTED", ...), as
// the server's logs and the dllm_requests_total{status} label spell it.
#ifndef DLLM_CLIENT_GRPC_CODE_NAME_H_
#define DLLM_CLIENT_GRPC_CODE_NAME_H_

#include <grpcpp/support/status.h>

namespace dllm::client {

const char* GrpcCodeName(grpc::StatusCode code);

}  // namespace dllm::client

#endif  // DLLM_CLIENT_GRPC_CODE_NAME_H_
