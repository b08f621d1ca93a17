#include "server/grpc/lingering_closer.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "server/grpc/socket_shutdown_hook.h"

namespace dllm {

absl::StatusOr<std::unique_ptr<LingeringCloser>> LingeringCloser::Create(
    absl::Duration linger, std::function<void()> sweep, absl::Duration sweep_every) {
  const int epoll_fd = epoll_create1(EPOLL_CLOEXEC);
  if (epoll_fd < 0) {
    return absl::InternalError(absl::StrCat("epoll_create1: ", std::strerror(errno)));
  }
  const int wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  epoll_event wake = {};
  wake.events = EPOLLIN;
  wake.data.fd = wake_fd;
  if (wake_fd < 0 || epoll_ctl(epoll_fd, EPOLL_CTL_ADD, wake_fd, &wake) != 0) {
    const std::string reason = std::strerror(errno);
    close(epoll_fd);
    if (wake_fd >= 0) close(wake_fd);
    return absl::InternalError(absl::StrCat("lingering closer's eventfd: ", reason));
  }
  return std::unique_ptr<LingeringCloser>(
      new LingeringCloser(epoll_fd, wake_fd, linger, std::move(sweep), sweep_every));
}

LingeringCloser::LingeringCloser(int epoll_fd, int wake_fd, absl::Duration linger,
                                 std::function<void()> sweep, absl::Duration sweep_every)
    : epoll_fd_(epoll_fd),
      wake_fd_(wake_fd),
      linger_(linger),
      sweep_(std::move(sweep)),
      sweep_every_(sweep_every) {
  thread_ = std::thread([this] { Loop(); });
}

LingeringCloser::~LingeringCloser() {
  stopping_ = true;
  Wake();
  thread_.join();
  absl::MutexLock lock(&mu_);
  while (!deadlines_.empty()) Finish(deadlines_.begin()->first);
  close(wake_fd_);
  close(epoll_fd_);
}

void LingeringCloser::Close(int fd) {
  // The FIN goes after every byte already queued; reads stay open, so what the client still
  // sends is taken in rather than answered with a reset.
  RawShutdown(fd, SHUT_WR);
  if (Drain(fd)) {
    close(fd);
    return;
  }
  absl::MutexLock lock(&mu_);
  epoll_event event = {};
  event.events = EPOLLIN | EPOLLRDHUP;
  event.data.fd = fd;
  if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &event) != 0) {
    close(fd);  // cannot watch it (out of memory): close as gRPC would have
    return;
  }
  deadlines_[fd] = absl::Now() + linger_;
  // The loop may be waiting without a timeout (nothing lingered): it must see this deadline.
  Wake();
}

void LingeringCloser::Wake() {
  const uint64_t one = 1;
  (void)!write(wake_fd_, &one, sizeof(one));
}

size_t LingeringCloser::lingering() {
  absl::MutexLock lock(&mu_);
  return deadlines_.size();
}

bool LingeringCloser::AwaitNoneLingering(absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  auto none = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return deadlines_.empty(); };
  return mu_.AwaitWithDeadline(absl::Condition(&none), deadline);
}

bool LingeringCloser::Drain(int fd) {
  std::array<char, 16384> discard;
  for (;;) {
    const ssize_t n = read(fd, discard.data(), discard.size());
    if (n > 0) continue;
    if (n < 0 && errno == EINTR) continue;
    return n == 0 || errno != EAGAIN;  // EOF or a failed connection: done
  }
}

void LingeringCloser::Finish(int fd) {
  epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
  close(fd);
  deadlines_.erase(fd);
}

void LingeringCloser::Loop() {
  absl::Time next_sweep = absl::Now() + sweep_every_;
  std::array<epoll_event, 64> events;
  for (;;) {
    absl::Time wake_at = sweep_ ? next_sweep : absl::InfiniteFuture();
    {
      absl::MutexLock lock(&mu_);
      for (const auto& [fd, deadline] : deadlines_) wake_at = std::min(wake_at, deadline);
    }
    const int timeout_ms =
        wake_at == absl::InfiniteFuture()
            ? -1
            : static_cast<int>(std::clamp<int64_t>(
                  absl::ToInt64Milliseconds(wake_at - absl::Now()) + 1, 0, 60'000));
    const int n = epoll_wait(epoll_fd_, events.data(), static_cast<int>(events.size()), timeout_ms);
    if (n < 0 && errno != EINTR) return;
    {
      absl::MutexLock lock(&mu_);
      for (int i = 0; i < n; ++i) {
        const int fd = events[i].data.fd;
        if (fd == wake_fd_) {
          uint64_t count = 0;
          (void)!read(wake_fd_, &count, sizeof(count));
          if (stopping_) return;
          continue;  // a new deadline: the timeout is recomputed below
        }
        if (deadlines_.count(fd) != 0 && Drain(fd)) Finish(fd);
      }
      const absl::Time now = absl::Now();
      for (auto it = deadlines_.begin(); it != deadlines_.end();) {
        const int fd = it->first;
        const bool overdue = it->second <= now;
        ++it;
        if (overdue) Finish(fd);
      }
    }
    if (sweep_ && absl::Now() >= next_sweep) {
      sweep_();  // without mu_: it may call Close
      next_sweep = absl::Now() + sweep_every_;
    }
  }
}

}  // namespace dllm
