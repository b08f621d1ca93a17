// GrpcListener's socket: binding (a busy port is named as such), port 0, that
// StopAccepting makes new connections fail at once (what lets a balancer retry elsewhere),
// and that a connection gRPC ends is closed without a reset while its client still sends.
#include "server/grpc/grpc_listener.h"

#include <arpa/inet.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server.h>
#include <grpcpp/server_builder.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cerrno>
#include <string>

#include "absl/time/clock.h"
#include "dllm/v1/dllm.grpc.pb.h"

namespace dllm {
namespace {

// A loopback connection to `port`: its descriptor, or -1 when refused.
int ConnectTo(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a = {};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

bool Connects(int port) {
  const int fd = ConnectTo(port);
  if (fd >= 0) close(fd);
  return fd >= 0;
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

// Reads until end of stream (0), a failure (-errno) or 5 s without either (-ETIMEDOUT).
int ReadToEnd(int fd) {
  char buffer[4096];
  for (;;) {
    pollfd p = {fd, POLLIN, 0};
    if (poll(&p, 1, 5000) != 1) return -ETIMEDOUT;
    const ssize_t n = read(fd, buffer, sizeof(buffer));
    if (n == 0) return 0;
    if (n < 0) return -errno;
  }
}

// A listener handing its connections to a started gRPC server (with no working method).
struct ServedListener {
  ServedListener() {
    absl::StatusOr<std::unique_ptr<GrpcListener>> bound = GrpcListener::Bind("127.0.0.1:0");
    REQUIRE(bound.ok());
    listener = *std::move(bound);
    grpc::ServerBuilder builder;
    auto acceptor = builder.experimental().AddExternalConnectionAcceptor(
        grpc::ServerBuilder::experimental_type::ExternalConnectionType::FROM_FD,
        grpc::InsecureServerCredentials());
    builder.RegisterService(&unimplemented);  // a server needs a service
    server = builder.BuildAndStart();
    REQUIRE(server != nullptr);
    listener->Start(std::move(acceptor));
  }
  ~ServedListener() {
    listener->StopAccepting();
    server->Shutdown(std::chrono::system_clock::now());
  }
  v1::DiffusionLM::CallbackService unimplemented;
  std::unique_ptr<grpc::Server> server;
  std::unique_ptr<GrpcListener> listener;
};

TEST_CASE(
    "grpc listener: a connection gRPC ends is half-closed, not reset, while its client "
    "still sends") {
  ServedListener served;
  GrpcListener* listener = served.listener.get();

  for (int round = 0; round < 3; ++round) {
    INFO("round " << round);
    const int fd = ConnectTo(listener->port());
    REQUIRE(fd >= 0);
    // Not HTTP/2: gRPC answers with what it answers and ends the connection
    // (shutdown(SHUT_RDWR), close).
    const std::string not_http2 = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
    REQUIRE(write(fd, not_http2.data(), not_http2.size()) == ssize_t(not_http2.size()));
    CHECK(ReadToEnd(fd) == 0);  // a FIN: gRPC is done
    // The client is still sending (as a client reading its last replies sends WINDOW_UPDATEs).
    // On a socket shut down for reading, or closed, Linux answers that with a reset, and the
    // read below would fail with ECONNRESET; on a lingering one the bytes are read and
    // dropped, and the socket closes once the client has closed its side.
    const std::string more(1000, 'x');
    CHECK(send(fd, more.data(), more.size(), MSG_NOSIGNAL) == ssize_t(more.size()));
    absl::SleepFor(absl::Milliseconds(100));  // time for a reset to arrive
    CHECK(send(fd, more.data(), more.size(), MSG_NOSIGNAL) == ssize_t(more.size()));
    CHECK(ReadToEnd(fd) == 0);
    CHECK(listener->open_connections() == 0);
    close(fd);
  }
  // The server's side closes once the client's FIN arrives: nothing keeps the port's
  // connections (ss would show them in FIN_WAIT2 or CLOSE_WAIT otherwise).
  CHECK(listener->CloseConnections(absl::Now() + absl::Seconds(5)));
}

TEST_CASE(
    "grpc listener: CloseConnections half-closes open connections and waits for their "
    "clients") {
  ServedListener served;
  GrpcListener* listener = served.listener.get();
  const int fd = ConnectTo(listener->port());
  REQUIRE(fd >= 0);
  const absl::Time wait_until = absl::Now() + absl::Seconds(5);
  while (listener->open_connections() == 0 && absl::Now() < wait_until) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  REQUIRE(listener->open_connections() == 1);
  // The client does not close: CloseConnections gives up at its deadline.
  const absl::Time start = absl::Now();
  CHECK_FALSE(listener->CloseConnections(absl::Now() + absl::Milliseconds(300)));
  CHECK(absl::Now() - start >= absl::Milliseconds(250));
  CHECK(ReadToEnd(fd) == 0);  // it got the FIN (after gRPC's SETTINGS)
  close(fd);
  CHECK(listener->CloseConnections(absl::Now() + absl::Seconds(5)));
}

}  // namespace
}  // namespace dllm
