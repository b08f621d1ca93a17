// Builds DiffusionLM requests from dllm-client options.
#ifndef DLLM_CLIENT_REQUEST_BUILDER_H_
#define DLLM_CLIENT_REQUEST_BUILDER_H_

#include "absl/status/statusor.h"
#include "client/client_options.h"
#include "dllm/v1/dllm.pb.h"

namespace dllm::client {

// INVALID_ARGUMENT for unknown enum names (--schedule, --remasking, --cache). Input
// validation beyond that is the server's job (so that tests can send bad requests).
absl::StatusOr<v1::GenerateRequest> BuildGenerateRequest(const ClientOptions& options);
absl::StatusOr<v1::TokenizeRequest> BuildTokenizeRequest(const ClientOptions& options);

}  // namespace dllm::client

#endif  // DLLM_CLIENT_REQUEST_BUILDER_H_
