// The process's shutdown(2), wrapped so that the owner of a socket can take over its
// shutdown. GrpcListener uses it to close gRPC's connections without resetting them
// (server/grpc/lingering_closer.h says why a reset loses replies).
//
// How: this file's object defines `shutdown` in the executable. The dynamic linker binds
// every call in the process to the executable's definition ahead of libc's, gRPC's included
// (gRPC has no hook of its own for how its sockets end). The definition asks each registered
// claimer whether it owns the socket; if none does, it is the system call, unchanged.
// Only SHUT_RD and SHUT_RDWR are offered to claimers: SHUT_WR cannot lose data.
//
// Thread-safety: all functions from any thread. ClaimShutdown runs on the thread that called
// shutdown (a gRPC thread), under the registry's reader lock: a claimer must not call
// RegisterShutdownClaimer or UnregisterShutdownClaimer from it, and must use RawShutdown.
#ifndef DLLM_SERVER_GRPC_SOCKET_SHUTDOWN_HOOK_H_
#define DLLM_SERVER_GRPC_SOCKET_SHUTDOWN_HOOK_H_

namespace dllm {

class SocketShutdownClaimer {
 public:
  // True when `fd` is a socket this claimer owns and has shut down its own way (shutdown
  // then returns 0 to its caller); false leaves it to the system call.
  virtual bool ClaimShutdown(int fd, int how) = 0;

 protected:
  ~SocketShutdownClaimer() = default;
};

// `claimer` is offered every shutdown(SHUT_RD | SHUT_RDWR) in the process from now on, until
// it is unregistered; Unregister returns once no call to it is running.
void RegisterShutdownClaimer(SocketShutdownClaimer* claimer);
void UnregisterShutdownClaimer(SocketShutdownClaimer* claimer);

// shutdown(2) itself, offered to no claimer.
int RawShutdown(int fd, int how);

}  // namespace dllm

#endif  // DLLM_SERVER_GRPC_SOCKET_SHUTDOWN_HOOK_H_
