#include "server/grpc/grpc_listener.h"

#include <dirent.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string_view>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace dllm {

absl::StatusOr<std::unique_ptr<GrpcListener>> GrpcListener::Bind(const std::string& address,
                                                                 absl::Duration linger) {
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
  std::unique_ptr<GrpcListener> listener(new GrpcListener(fd, bound_port, wake_fd));
  GrpcListener* self = listener.get();
  absl::StatusOr<std::unique_ptr<LingeringCloser>> closer = LingeringCloser::Create(linger, [self] {
    absl::MutexLock lock(&self->mu_);
    self->PruneClosed();
  });
  if (!closer.ok()) return fail(std::string(closer.status().message()));
  listener->closer_ = *std::move(closer);
  RegisterShutdownClaimer(self);
  return listener;
}

GrpcListener::~GrpcListener() {
  StopAccepting();
  if (closer_ != nullptr) {
    UnregisterShutdownClaimer(this);
    closer_.reset();  // stops its sweeps of handed_
  }
  absl::MutexLock lock(&mu_);
  for (const auto& [fd, h] : handed_) {
    if (h.own_fd >= 0 && !h.released) close(h.own_fd);
  }
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
    // A connection remembered under this number was closed by gRPC without a shutdown (the
    // kernel reuses only free numbers), and its sweep has not come yet.
    if (auto stale = handed_.find(fd); stale != handed_.end()) {
      if (!stale->second.released) Release(stale->second);
      handed_.erase(stale);
    }
    handed_[fd] = {.own_fd = fcntl(fd, F_DUPFD_CLOEXEC, 0),
                   .device = st.st_dev,
                   .inode = st.st_ino,
                   .accepted = absl::Now()};
  }
  grpc::experimental::ExternalConnectionAcceptor::NewConnectionParameters params;
  params.listener_fd = listen_fd_;
  params.fd = fd;  // gRPC owns it from here
  acceptor_->HandleNewConnection(&params);
}

void GrpcListener::ForgetEpollRegistration(int fd) {
  epoll_event unused = {};
  for (const int epoll_fd : epoll_fds_) {
    if (epoll_ctl(epoll_fd, EPOLL_CTL_DEL, fd, &unused) == 0) return;
  }
  // Not in a set seen so far: look for the process's epoll sets again (gRPC makes its own
  // when it starts; ENOENT from the others is harmless).
  epoll_fds_.clear();
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return;
  while (const dirent* entry = readdir(dir)) {
    int n = -1;
    if (!absl::SimpleAtoi(entry->d_name, &n) || n == dirfd(dir)) continue;
    char target[64] = {};
    const std::string path = absl::StrCat("/proc/self/fd/", entry->d_name);
    const ssize_t len = readlink(path.c_str(), target, sizeof(target) - 1);
    if (len > 0 && std::string_view(target, len) == "anon_inode:[eventpoll]") {
      epoll_fds_.push_back(n);
    }
  }
  closedir(dir);
  for (const int epoll_fd : epoll_fds_) {
    if (epoll_ctl(epoll_fd, EPOLL_CTL_DEL, fd, &unused) == 0) return;
  }
}

void GrpcListener::Release(const Handed& h) {
  if (h.own_fd >= 0) closer_->Close(h.own_fd);
}

void GrpcListener::PruneClosed() {
  for (auto it = handed_.begin(); it != handed_.end();) {
    struct stat st = {};
    const Handed& h = it->second;
    if (fstat(it->first, &st) == 0 && st.st_dev == h.device && st.st_ino == h.inode) {
      ++it;
      continue;
    }
    if (!h.released) Release(h);
    it = handed_.erase(it);
  }
}

bool GrpcListener::ClaimShutdown(int fd, int how) {
  if (how != SHUT_RDWR) return false;
  struct stat st = {};
  if (fstat(fd, &st) != 0) return false;
  absl::MutexLock lock(&mu_);
  auto it = handed_.find(fd);
  // Another socket under a remembered number (say the HTTP listener's, after gRPC closed
  // ours without a shutdown), or one we hold no duplicate of: the system call's.
  if (it == handed_.end() || it->second.device != st.st_dev || it->second.inode != st.st_ino ||
      it->second.own_fd < 0) {
    return false;
  }
  // gRPC is done with the connection and closes its descriptor next; the socket lives on in
  // ours until its client has read the last replies and closed its side. gRPC's poller
  // registered the socket in its epoll set, and a registration lasts as long as the socket,
  // not the descriptor: remove it, as gRPC's close alone would have, so that the socket's
  // last events are not reported to whichever connection gRPC gives that slot next.
  ForgetEpollRegistration(fd);
  if (!it->second.released) Release(it->second);
  handed_.erase(it);
  return true;
}

bool GrpcListener::CloseConnections(absl::Time deadline) {
  {
    absl::MutexLock lock(&mu_);
    PruneClosed();
    // Each stays in handed_ until gRPC's shutdown, which is then claimed (a SHUT_RD now
    // would reset the socket we are closing gently).
    for (auto& [fd, h] : handed_) {
      if (h.own_fd >= 0 && !h.released) {
        Release(h);
        h.released = true;
      } else if (h.own_fd < 0) {
        RawShutdown(fd, SHUT_WR);
      }
    }
  }
  return closer_->AwaitNoneLingering(deadline);
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
  for (const auto& [fd, h] : handed_) out = std::max(out, h.accepted + age);
  return out;
}

}  // namespace dllm
