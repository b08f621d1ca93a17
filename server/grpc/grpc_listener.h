// GrpcListener: the gRPC port's listening socket, owned by us rather than by gRPC, so that
// a draining server can stop accepting connections without grpc::Server::Shutdown.
//
// Why: at the end of a SIGTERM's lame-duck period the server must stop taking new
// connections, so that a balancer (nginx, a gRPC client's round_robin) gets "connection
// refused" and sends the call to another replica. gRPC's own listener closes only in
// Shutdown, which also turns calls that arrive meanwhile into zombies that their clients see
// as CANCELLED, unlogged and uncounted. Here an accept thread hands each connection to gRPC
// (ServerBuilder's external connection acceptor, with the same credentials, TLS included)
// and StopAccepting closes the socket; connections already open keep being served.
//
// It also remembers the connections it handed over, so that a drain can wait until each has
// been sent its GOAWAY (gRPC's max connection age) before it refuses calls on them.
//
// And it decides how they end. It keeps a duplicate of each connection's descriptor and
// claims gRPC's shutdown(SHUT_RDWR) of it (server/grpc/socket_shutdown_hook.h), so that the
// socket outlives gRPC's close and ends in a lingering close (server/grpc/lingering_closer.h)
// instead of a reset that discards the last replies. Each open connection costs two
// descriptors.
//
// Thread-safety: Start, StopAccepting and CloseConnections are called from one thread
// (main); open_connections and OpenConnectionsAgedBy from any.
#ifndef DLLM_SERVER_GRPC_GRPC_LISTENER_H_
#define DLLM_SERVER_GRPC_GRPC_LISTENER_H_

#include <grpcpp/server_builder.h>
#include <sys/types.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/grpc/lingering_closer.h"
#include "server/grpc/socket_shutdown_hook.h"

namespace dllm {

class GrpcListener : private SocketShutdownClaimer {
 public:
  // Binds and listens on `address` ("host:port", "[v6]:port"; port 0 = any free port).
  // UNAVAILABLE naming the address and the cause when it cannot (a port in use says so).
  // Like gRPC: SO_REUSEADDR, never SO_REUSEPORT (a second server must not split the traffic).
  // A connection that gRPC ends lingers up to `linger` for its client to close its side.
  static absl::StatusOr<std::unique_ptr<GrpcListener>> Bind(
      const std::string& address, absl::Duration linger = absl::Seconds(5));
  ~GrpcListener();  // StopAccepting(); connections still lingering are closed
  GrpcListener(const GrpcListener&) = delete;
  GrpcListener& operator=(const GrpcListener&) = delete;

  int port() const { return port_; }
  // Starts accepting on a background thread; each connection goes to `acceptor`, which must
  // outlive this listener and belong to a started grpc::Server.
  void Start(std::unique_ptr<grpc::experimental::ExternalConnectionAcceptor> acceptor);
  // Closes the listening socket: new connections are refused from now on.
  void StopAccepting();
  // Connections handed to gRPC that are still open.
  size_t open_connections();
  // When every connection open now will have been open for `age`: the past when none is.
  // (With gRPC's max connection age below `age`, each has then been sent its GOAWAY.)
  absl::Time OpenConnectionsAgedBy(absl::Duration age);
  // For an exit: half-closes every open connection (a FIN after the replies already
  // written) and waits until each client has closed its side, or `deadline`. gRPC's own
  // descriptors stay open (the process is about to end). True when all are closed.
  bool CloseConnections(absl::Time deadline);

 private:
  GrpcListener(int listen_fd, int port, int wake_fd)
      : listen_fd_(listen_fd), port_(port), wake_fd_(wake_fd) {}
  void AcceptLoop();
  void Hand(int fd);  // gives an accepted connection to gRPC
  // Hands the connections gRPC has closed without a shutdown to the closer (a safety net:
  // gRPC 1.51 always shuts down first).
  void PruneClosed() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool ClaimShutdown(int fd, int how) override;

  // A connection handed to gRPC, remembered under `fd`, gRPC's descriptor. It is still open
  // while that descriptor refers to the same socket (a reused number has another inode).
  // `own_fd` is ours, a duplicate (-1 when there was no descriptor to spare: then gRPC's
  // close ends it).
  struct Handed {
    int own_fd;
    dev_t device;
    ino_t inode;
    absl::Time accepted;
    bool released = false;  // own_fd is the closer's now (CloseConnections)
  };
  // Ends our hold on `h`'s socket: a lingering close of our duplicate.
  void Release(const Handed& h);
  // Removes `fd` from the epoll set it is registered in (gRPC's), if any.
  void ForgetEpollRegistration(int fd) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  int listen_fd_;
  const int port_;
  int wake_fd_;  // eventfd: tells the accept loop to stop
  std::unique_ptr<grpc::experimental::ExternalConnectionAcceptor> acceptor_;
  std::thread thread_;
  absl::Mutex mu_;
  // By gRPC's descriptor: a shutdown is claimed in O(1), and a number the kernel hands out
  // again proves that its previous connection is closed.
  std::unordered_map<int, Handed> handed_ ABSL_GUARDED_BY(mu_);
  std::vector<int> epoll_fds_ ABSL_GUARDED_BY(mu_);  // the process's epoll sets, last seen
  // Last member: destroyed first, its thread (which sweeps handed_) stopped before the rest.
  std::unique_ptr<LingeringCloser> closer_;
};

}  // namespace dllm

#endif  // DLLM_SERVER_GRPC_GRPC_LISTENER_H_
