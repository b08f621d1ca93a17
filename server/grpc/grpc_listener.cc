#include "server/grpc/grpc_listener.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace dllm {

absl::StatusOr<std::unique_ptr<GrpcListener>> GrpcListener::Bind(const std::string& address) {
  auto fail = [&address](const std::string& reason) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", address, ": ", reason));
  };
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos) return fail("not a host:port address");
  std::string host = address.substr(0, colon);
  const std::string port = address.substr(colon + 1);
  int port_number = -1;
  if (!absl::SimpleAtoi(port, &port_number) || port_number < 0 || port_number > 65535) {
    return fail(absl::StrCat("port '", port, "' is not in 0..65535"));
  }
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  addrinfo hints = {};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* results = nullptr;
  if (const int rc =
          getaddrinfo(host.empty() ? nullptr : host.c_str(), port.c_str(), &hints, &results);
      rc != 0) {
    return fail(absl::StrCat("cannot resolve host: ", gai_strerror(rc)));
  }
  int fd = -1;
  std::string reason = "no address to bind";
  for (addrinfo* ai = results; ai != nullptr && fd < 0; ai = ai->ai_next) {
    // Non-blocking: the accept loop polls first, and StopAccepting empties the backlog.
    fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol);
    if (fd < 0) {
      reason = std::strerror(errno);
      continue;
    }
    const int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd, SOMAXCONN) != 0) {
      reason = std::strerror(errno);
      if (errno == EADDRINUSE) {
        absl::StrAppend(&reason, " (another process, perhaps another dllm-server, holds it)");
      }
      close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(results);
  if (fd < 0) return fail(reason);
  sockaddr_storage bound = {};
  socklen_t bound_len = sizeof(bound);
  getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &bound_len);
  const int bound_port = bound.ss_family == AF_INET6
                             ? ntohs(reinterpret_cast<const sockaddr_in6*>(&bound)->sin6_port)
                             : ntohs(reinterpret_cast<const sockaddr_in*>(&bound)->sin_port);
  const int wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake_fd < 0) {
    close(fd);
    return fail(absl::StrCat("eventfd: ", std::strerror(errno)));
  }
  return std::unique_ptr<GrpcListener>(new GrpcListener(fd, bound_port, wake_fd));
}

GrpcListener::~GrpcListener() {
  StopAccepting();
  if (wake_fd_ >= 0) close(wake_fd_);
}

void GrpcListener::Start(std::unique_ptr<grpc::experimental::ExternalConnectionAcceptor> acceptor) {
  acceptor_ = std::move(acceptor);
  thread_ = std::thread([this] { AcceptLoop(); });
}

void GrpcListener::StopAccepting() {
  if (thread_.joinable()) {
    const uint64_t one = 1;
    (void)!write(wake_fd_, &one, sizeof(one));
    thread_.join();
    // Connections already in the kernel's backlog have sent (or are sending) a call: hand
    // them to gRPC rather than let the close reset them.
    for (;;) {
      const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (fd < 0) break;
      Hand(fd);
    }
  }
  if (listen_fd_ >= 0) {
    close(listen_fd_);
    listen_fd_ = -1;
  }
}

void GrpcListener::AcceptLoop() {
  for (;;) {
    pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (fds[1].revents != 0) return;
    const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) {
      // Out of descriptors (EMFILE) or a connection gone before accept: a busy loop would
      // not help the first; wait a little.
      if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED) {
        absl::SleepFor(absl::Milliseconds(50));
      }
      continue;
    }
    Hand(fd);
  }
}

void GrpcListener::Hand(int fd) {
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));  // as gRPC's own listener
  struct stat st = {};
  if (fstat(fd, &st) == 0) {
    absl::MutexLock lock(&mu_);
    // Pruning costs an fstat per remembered connection: amortized, by doubling.
    if (handed_.size() >= prune_at_) {
      PruneClosed();
      prune_at_ = std::max<size_t>(64, 2 * handed_.size());
    }
    handed_.push_back({fd, st.st_dev, st.st_ino, absl::Now()});
  }
  grpc::experimental::ExternalConnectionAcceptor::NewConnectionParameters params;
  params.listener_fd = listen_fd_;
  params.fd = fd;  // gRPC owns it from here
  acceptor_->HandleNewConnection(&params);
}

void GrpcListener::PruneClosed() {
  handed_.erase(std::remove_if(handed_.begin(), handed_.end(),
                               [](const Handed& h) {
                                 struct stat st = {};
                                 return fstat(h.fd, &st) != 0 || st.st_dev != h.device ||
                                        st.st_ino != h.inode;
                               }),
                handed_.end());
}

size_t GrpcListener::open_connections() {
  absl::MutexLock lock(&mu_);
  PruneClosed();
  return handed_.size();
}

absl::Time GrpcListener::OpenConnectionsAgedBy(absl::Duration age) {
  absl::MutexLock lock(&mu_);
  PruneClosed();
  absl::Time out = absl::InfinitePast();
  for (const Handed& h : handed_) out = std::max(out, h.accepted + age);
  return out;
}

}  // namespace dllm
