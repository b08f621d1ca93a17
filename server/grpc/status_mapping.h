// The one place where engine errors (absl::Status) become gRPC statuses.
#ifndef DLLM_SERVER_GRPC_STATUS_MAPPING_H_
#define DLLM_SERVER_GRPC_STATUS_MAPPING_H_

#include <grpcpp/support/status.h>

#include "absl/status/status.h"

namespace dllm {

// Maps the canonical code one to one and keeps the message (which names the field for
// INVALID_ARGUMENT). Codes outside the canonical set become INTERNAL.
grpc::Status ToGrpcStatus(const absl::Status& status);

}  // namespace dllm

#endif  // DLLM_SERVER_GRPC_STATUS_MAPPING_H_
