// LingeringCloser: closes a server's TCP connections the way a server must when replies may
// still be on their way: half-close, read until the client closes, then close (what Apache
// and nginx call a lingering close).
//
// Why: a socket closed while bytes from its client are unread, or shut down for reading
// before more arrive, makes Linux answer with a reset, and a reset discards what the
// server's kernel has not yet sent. gRPC ends a connection that way (shutdown(SHUT_RDWR),
// close) as soon as its last call's trailers are written, e.g. after the GOAWAY of
// server.max_connection_age_seconds; a client still sending (a WINDOW_UPDATE for the reply it
// is reading) then got UNAVAILABLE "Connection reset by peer" for calls the server had
// completed: 8 streams of 7,280 in a 15 s load at a 2 s age on a loaded machine.
//
// Each socket handed here gets shutdown(SHUT_WR) (a FIN after every byte already written),
// then whatever its client sends is read and discarded until it closes its side, the
// connection fails, or `linger` passes; then it is closed.
//
// Thread-safety: every method from any thread. One thread of its own does the reading.
#ifndef DLLM_SERVER_GRPC_LINGERING_CLOSER_H_
#define DLLM_SERVER_GRPC_LINGERING_CLOSER_H_

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace dllm {

class LingeringCloser {
 public:
  // `sweep`, when set, is called from the closer's thread every `sweep_every`; it may call
  // Close (GrpcListener finds there the connections gRPC closed without a shutdown).
  static absl::StatusOr<std::unique_ptr<LingeringCloser>> Create(
      absl::Duration linger, std::function<void()> sweep = nullptr,
      absl::Duration sweep_every = absl::Seconds(1));
  ~LingeringCloser();  // stops the thread; sockets still lingering are closed at once
  LingeringCloser(const LingeringCloser&) = delete;
  LingeringCloser& operator=(const LingeringCloser&) = delete;

  // Takes ownership of `fd`, a connected non-blocking TCP socket, and closes it as above.
  void Close(int fd);
  // Sockets handed to Close and not yet closed.
  size_t lingering();
  // Waits until none is lingering, or `deadline`; true when none is.
  bool AwaitNoneLingering(absl::Time deadline);

 private:
  LingeringCloser(int epoll_fd, int wake_fd, absl::Duration linger, std::function<void()> sweep,
                  absl::Duration sweep_every);
  void Loop();
  // Reads and discards what `fd` has; true when it is finished (closed by the peer, failed).
  static bool Drain(int fd);
  void Finish(int fd) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Wake();  // makes the loop recompute its timeout (and see stopping_)

  const int epoll_fd_;
  const int wake_fd_;  // eventfd: wakes the loop (a new deadline, or stopping_)
  std::atomic<bool> stopping_{false};
  const absl::Duration linger_;
  const std::function<void()> sweep_;
  const absl::Duration sweep_every_;
  absl::Mutex mu_;
  std::map<int, absl::Time> deadlines_ ABSL_GUARDED_BY(mu_);  // fd -> when it is closed anyway
  std::thread thread_;
};

}  // namespace dllm

#endif  // DLLM_SERVER_GRPC_LINGERING_CLOSER_H_
