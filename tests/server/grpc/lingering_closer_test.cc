// LingeringCloser against real loopback TCP connections: the peer gets a FIN after what was
// written, what it sends afterwards is taken in (no reset), and the socket closes when the
// peer closes or the linger time passes. And the process-wide shutdown hook it relies on.
#include "server/grpc/lingering_closer.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <cerrno>
#include <string>
#include <utility>

#include "absl/time/clock.h"
#include "server/grpc/socket_shutdown_hook.h"

namespace dllm {
namespace {

// A connected loopback pair: {client, server}, the server's end non-blocking.
std::pair<int, int> TcpPair() {
  const int listener = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a = {};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(bind(listener, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0);
  REQUIRE(listen(listener, 1) == 0);
  socklen_t len = sizeof(a);
  getsockname(listener, reinterpret_cast<sockaddr*>(&a), &len);
  const int client = socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(connect(client, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0);
  const int server = accept4(listener, nullptr, nullptr, SOCK_NONBLOCK);
  REQUIRE(server >= 0);
  close(listener);
  return {client, server};
}

// What the client reads until end of stream; "<error>" on a failure, "<timeout>" after 5 s.
std::string ReadAll(int fd) {
  std::string out;
  char buffer[4096];
  for (;;) {
    pollfd p = {fd, POLLIN, 0};
    if (poll(&p, 1, 5000) != 1) return "<timeout>";
    const ssize_t n = read(fd, buffer, sizeof(buffer));
    if (n == 0) return out;
    if (n < 0) return "<error>";
    out.append(buffer, n);
  }
}

bool AwaitLingering(LingeringCloser& closer, size_t n) {
  const absl::Time until = absl::Now() + absl::Seconds(5);
  while (closer.lingering() != n && absl::Now() < until) absl::SleepFor(absl::Milliseconds(5));
  return closer.lingering() == n;
}

TEST_CASE(
    "lingering closer: FIN after the reply, the client's late bytes taken in, closed when "
    "the client closes") {
  absl::StatusOr<std::unique_ptr<LingeringCloser>> closer =
      LingeringCloser::Create(absl::Seconds(30));
  REQUIRE(closer.ok());
  auto [client, server] = TcpPair();
  REQUIRE(write(server, "reply", 5) == 5);
  (*closer)->Close(server);
  CHECK((*closer)->lingering() == 1);
  CHECK(ReadAll(client) == "reply");
  const std::string late(100000, 'w');  // more than fits in one read
  CHECK(send(client, late.data(), late.size(), MSG_NOSIGNAL) == ssize_t(late.size()));
  absl::SleepFor(absl::Milliseconds(50));
  CHECK(send(client, late.data(), late.size(), MSG_NOSIGNAL) == ssize_t(late.size()));
  CHECK((*closer)->lingering() == 1);  // the client has not closed
  shutdown(client, SHUT_WR);
  CHECK(AwaitLingering(**closer, 0));
  CHECK((*closer)->AwaitNoneLingering(absl::Now()));
  close(client);
}

TEST_CASE("lingering closer: a client that never closes is closed after the linger time") {
  absl::StatusOr<std::unique_ptr<LingeringCloser>> closer =
      LingeringCloser::Create(absl::Milliseconds(200));
  REQUIRE(closer.ok());
  auto [client, server] = TcpPair();
  // The loop is waiting with no timeout by now (nothing lingers): Close must wake it, or the
  // deadline would pass unnoticed.
  absl::SleepFor(absl::Milliseconds(50));
  const absl::Time start = absl::Now();
  (*closer)->Close(server);
  CHECK_FALSE((*closer)->AwaitNoneLingering(absl::Now() + absl::Milliseconds(50)));
  CHECK((*closer)->AwaitNoneLingering(absl::Now() + absl::Seconds(5)));
  CHECK(absl::Now() - start >= absl::Milliseconds(200));
  close(client);
}

TEST_CASE(
    "lingering closer: a socket whose client already closed is closed at once, and the sweep "
    "runs") {
  std::atomic<int> sweeps{0};
  absl::StatusOr<std::unique_ptr<LingeringCloser>> closer = LingeringCloser::Create(
      absl::Seconds(30), [&sweeps] { ++sweeps; }, absl::Milliseconds(20));
  REQUIRE(closer.ok());
  auto [client, server] = TcpPair();
  close(client);
  absl::SleepFor(absl::Milliseconds(20));  // the FIN arrives
  (*closer)->Close(server);
  CHECK((*closer)->lingering() == 0);
  const absl::Time until = absl::Now() + absl::Seconds(5);
  while (sweeps < 3 && absl::Now() < until) absl::SleepFor(absl::Milliseconds(5));
  CHECK(sweeps >= 3);
}

class RecordingClaimer : public SocketShutdownClaimer {
 public:
  explicit RecordingClaimer(int fd) : fd_(fd) {}
  bool ClaimShutdown(int fd, int how) override {
    if (fd != fd_) return false;
    last_how = how;
    return true;
  }
  int last_how = -1;

 private:
  int fd_;
};

TEST_CASE("shutdown hook: a registered claimer takes SHUT_RD and SHUT_RDWR of its sockets") {
  auto [client, server] = TcpPair();
  RecordingClaimer claimer(server);
  RegisterShutdownClaimer(&claimer);
  CHECK(shutdown(server, SHUT_RDWR) == 0);
  CHECK(claimer.last_how == SHUT_RDWR);
  // Claimed: the socket was not shut down, so the client sees no end of stream.
  pollfd p = {client, POLLIN, 0};
  CHECK(poll(&p, 1, 100) == 0);
  CHECK(shutdown(server, SHUT_WR) == 0);  // never offered: it goes through
  CHECK(claimer.last_how == SHUT_RDWR);
  CHECK(ReadAll(client).empty());
  UnregisterShutdownClaimer(&claimer);
  claimer.last_how = -1;
  CHECK(shutdown(server, SHUT_RD) == 0);
  CHECK(claimer.last_how == -1);
  close(client);
  close(server);
}

}  // namespace
}  // namespace dllm
