// Channel and per-call context setup for dllm-client: TLS / mutual TLS credentials, the
// bearer token and the call deadline.
#ifndef DLLM_CLIENT_CONNECTION_H_
#define DLLM_CLIENT_CONNECTION_H_

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "client/client_options.h"

namespace dllm::client {

class Connection {
 public:
  // Reads the certificate and token files named in `options`.
  static absl::StatusOr<Connection> Open(const ClientOptions& options);

  const std::shared_ptr<grpc::Channel>& channel() const { return channel_; }
  // Adds the bearer token and the deadline (from --timeout) to a fresh context.
  void Prepare(grpc::ClientContext* context) const;

 private:
  std::shared_ptr<grpc::Channel> channel_;
  std::string token_;
  std::optional<double> timeout_seconds_;
};

}  // namespace dllm::client

#endif  // DLLM_CLIENT_CONNECTION_H_
