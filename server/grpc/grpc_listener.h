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
// Thread-safety: Start and StopAccepting are called from one thread (main).
#ifndef DLLM_SERVER_GRPC_GRPC_LISTENER_H_
#define DLLM_SERVER_GRPC_GRPC_LISTENER_H_

#include <grpcpp/server_builder.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"

namespace dllm {

class GrpcListener {
 public:
  // Binds and listens on `address` ("host:port", "[v6]:port"; port 0 = any free port).
  // UNAVAILABLE naming the address and the cause when it cannot (a port in use says so).
  // Like gRPC: SO_REUSEADDR, never SO_REUSEPORT (a second server must not split the traffic).
  static absl::StatusOr<std::unique_ptr<GrpcListener>> Bind(const std::string& address);
  ~GrpcListener();  // StopAccepting()
  GrpcListener(const GrpcListener&) = delete;
  GrpcListener& operator=(const GrpcListener&) = delete;

  int port() const { return port_; }
  // Starts accepting on a background thread; each connection goes to `acceptor`, which must
  // outlive this listener and belong to a started grpc::Server.
  void Start(std::unique_ptr<grpc::experimental::ExternalConnectionAcceptor> acceptor);
  // Closes the listening socket: new connections are refused from now on.
  void StopAccepting();

 private:
  GrpcListener(int listen_fd, int port, int wake_fd)
      : listen_fd_(listen_fd), port_(port), wake_fd_(wake_fd) {}
  void AcceptLoop();
  void Hand(int fd);  // gives an accepted connection to gRPC

  int listen_fd_;
  const int port_;
  int wake_fd_;  // eventfd: tells the accept loop to stop
  std::unique_ptr<grpc::experimental::ExternalConnectionAcceptor> acceptor_;
  std::thread thread_;
};

}  // namespace dllm

#endif  // DLLM_SERVER_GRPC_GRPC_LISTENER_H_
