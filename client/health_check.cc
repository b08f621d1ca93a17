#include "client/health_check.h"

#include <grpcpp/generic/generic_stub.h>

#include <chrono>
#include <vector>

#include "absl/synchronization/notification.h"

namespace dllm::client {
namespace {

const char* CodeName(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::UNAVAILABLE:
      return "UNAVAILABLE";
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return "DEADLINE_EXCEEDED";
    case grpc::StatusCode::UNAUTHENTICATED:
      return "UNAUTHENTICATED";
    case grpc::StatusCode::NOT_FOUND:
      return "NOT_FOUND";
    case grpc::StatusCode::UNIMPLEMENTED:
      return "UNIMPLEMENTED";
    default:
      return "ERROR";
  }
}

}  // namespace

std::string CheckHealth(const Connection& connection, const std::string& service,
                        double timeout_seconds) {
  // HealthCheckRequest { string service = 1; }
  std::string request;
  if (!service.empty()) {
    request.push_back(0x0a);
    size_t n = service.size();
    while (n >= 0x80) {
      request.push_back(static_cast<char>((n & 0x7f) | 0x80));
      n >>= 7;
    }
    request.push_back(static_cast<char>(n));
    request += service;
  }
  grpc::Slice slice(request);
  grpc::ByteBuffer request_buffer(&slice, 1);
  grpc::ByteBuffer response_buffer;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::milliseconds(static_cast<int64_t>(timeout_seconds * 1000)));
  grpc::GenericStub stub(connection.channel());
  absl::Notification done;
  grpc::Status status;
  stub.UnaryCall(&context, "/grpc.health.v1.Health/Check", grpc::StubOptions(), &request_buffer,
                 &response_buffer, [&](grpc::Status s) {
                   status = std::move(s);
                   done.Notify();
                 });
  done.WaitForNotification();
  if (!status.ok()) return CodeName(status.error_code());
  // HealthCheckResponse { ServingStatus status = 1; } — field 1, varint.
  std::vector<grpc::Slice> slices;
  std::string bytes;
  if (response_buffer.Dump(&slices).ok()) {
    for (const auto& s : slices) bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  }
  int value = 0;
  if (bytes.size() >= 2 && bytes[0] == 0x08) value = static_cast<unsigned char>(bytes[1]);
  switch (value) {
    case 1:
      return "SERVING";
    case 2:
      return "NOT_SERVING";
    case 3:
      return "SERVICE_UNKNOWN";
    default:
      return "UNKNOWN";
  }
}

}  // namespace dllm::client
