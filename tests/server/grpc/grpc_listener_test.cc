// GrpcListener's socket: binding (a busy port is named as such), port 0, and that
// StopAccepting makes new connections fail at once (what lets a balancer retry elsewhere).
#include "server/grpc/grpc_listener.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <string>

namespace dllm {
namespace {

bool Connects(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a = {};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const bool ok = connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
  close(fd);
  return ok;
}

TEST_CASE("grpc listener: binds port 0, names a busy port, refuses after StopAccepting") {
  absl::StatusOr<std::unique_ptr<GrpcListener>> first = GrpcListener::Bind("127.0.0.1:0");
  REQUIRE(first.ok());
  const int port = (*first)->port();
  CHECK(port > 0);
  CHECK(Connects(port));  // the kernel completes the handshake into the backlog

  const std::string busy = "127.0.0.1:" + std::to_string(port);
  absl::StatusOr<std::unique_ptr<GrpcListener>> second = GrpcListener::Bind(busy);
  REQUIRE_FALSE(second.ok());
  CHECK(second.status().code() == absl::StatusCode::kUnavailable);
  CHECK_THAT(std::string(second.status().message()), Catch::Contains("cannot listen on " + busy) &&
                                                         Catch::Contains("Address already in use"));

  (*first)->StopAccepting();
  CHECK_FALSE(Connects(port));
}

TEST_CASE("grpc listener: addresses it cannot use are named") {
  for (const char* address : {"no-port", "127.0.0.1:99999", "[::1:5"}) {
    INFO(address);
    absl::StatusOr<std::unique_ptr<GrpcListener>> l = GrpcListener::Bind(address);
    REQUIRE_FALSE(l.ok());
    CHECK_THAT(std::string(l.status().message()),
               Catch::StartsWith(std::string("cannot listen on ") + address));
  }
}

}  // namespace
}  // namespace dllm
