#include "server/grpc/status_mapping.h"

#include <catch2/catch.hpp>

namespace dllm {
namespace {

TEST_CASE("status mapping: canonical codes map one to one and keep the message") {
  const std::pair<absl::Status, grpc::StatusCode> cases[] = {
      {absl::CancelledError("c"), grpc::StatusCode::CANCELLED},
      {absl::UnknownError("c"), grpc::StatusCode::UNKNOWN},
      {absl::InvalidArgumentError("c"), grpc::StatusCode::INVALID_ARGUMENT},
      {absl::DeadlineExceededError("c"), grpc::StatusCode::DEADLINE_EXCEEDED},
      {absl::NotFoundError("c"), grpc::StatusCode::NOT_FOUND},
      {absl::AlreadyExistsError("c"), grpc::StatusCode::ALREADY_EXISTS},
      {absl::PermissionDeniedError("c"), grpc::StatusCode::PERMISSION_DENIED},
      {absl::ResourceExhaustedError("c"), grpc::StatusCode::RESOURCE_EXHAUSTED},
      {absl::FailedPreconditionError("c"), grpc::StatusCode::FAILED_PRECONDITION},
      {absl::AbortedError("c"), grpc::StatusCode::ABORTED},
      {absl::OutOfRangeError("c"), grpc::StatusCode::OUT_OF_RANGE},
      {absl::UnimplementedError("c"), grpc::StatusCode::UNIMPLEMENTED},
      {absl::InternalError("c"), grpc::StatusCode::INTERNAL},
      {absl::UnavailableError("c"), grpc::StatusCode::UNAVAILABLE},
      {absl::DataLossError("c"), grpc::StatusCode::DATA_LOSS},
      {absl::UnauthenticatedError("c"), grpc::StatusCode::UNAUTHENTICATED},
  };
  for (const auto& [in, code] : cases) {
    const grpc::Status out = ToGrpcStatus(in);
    CHECK(out.error_code() == code);
    CHECK(out.error_message() == "c");
    // One to one: the canonical codes share their numbers.
    CHECK(static_cast<int>(code) == static_cast<int>(in.code()));
  }
  CHECK(ToGrpcStatus(absl::OkStatus()).ok());
}

}  // namespace
}  // namespace dllm
