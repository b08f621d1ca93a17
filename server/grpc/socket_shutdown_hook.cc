#include "server/grpc/socket_shutdown_hook.h"

#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <vector>

#include "absl/synchronization/mutex.h"

namespace dllm {
namespace {

// The one piece of process-wide state in the server: shutdown(2) is process-wide, so the
// list of who may claim a socket has to be. Never destroyed (a shutdown during static
// destruction must still find it).
struct ClaimerRegistry {
  absl::Mutex mu;
  std::vector<SocketShutdownClaimer*> claimers ABSL_GUARDED_BY(mu);
};

ClaimerRegistry& Registry() {
  static ClaimerRegistry* const registry = new ClaimerRegistry;  // never deleted
  return *registry;
}

}  // namespace

void RegisterShutdownClaimer(SocketShutdownClaimer* claimer) {
  ClaimerRegistry& r = Registry();
  absl::WriterMutexLock lock(&r.mu);
  r.claimers.push_back(claimer);
}

void UnregisterShutdownClaimer(SocketShutdownClaimer* claimer) {
  ClaimerRegistry& r = Registry();
  absl::WriterMutexLock lock(&r.mu);
  r.claimers.erase(std::remove(r.claimers.begin(), r.claimers.end(), claimer), r.claimers.end());
}

int RawShutdown(int fd, int how) { return static_cast<int>(syscall(SYS_shutdown, fd, how)); }

}  // namespace dllm

// NOLINTNEXTLINE(readability-inconsistent-declaration-parameter-name): glibc's names are reserved
extern "C" int shutdown(int fd, int how) noexcept {
  if (how != SHUT_WR) {
    dllm::ClaimerRegistry& r = dllm::Registry();
    absl::ReaderMutexLock lock(&r.mu);
    for (dllm::SocketShutdownClaimer* claimer : r.claimers) {
      if (claimer->ClaimShutdown(fd, how)) return 0;
    }
  }
  return dllm::RawShutdown(fd, how);
}
