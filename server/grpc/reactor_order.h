// Tells ThreadSanitizer the order gRPC guarantees between a callback reactor's reactions: OnDone
// runs after Finish was called and after every other reaction (OnCancel, OnWriteDone) returned,
// on whatever thread. gRPC enforces that with atomics inside libgrpc++, which TSan cannot see
// unless gRPC itself is instrumented (Debian's is not), so without these annotations every field
// a reaction touches looks racy with the reactor's destruction in OnDone.
//
// Outside ThreadSanitizer builds both functions are empty.
#ifndef DLLM_SERVER_GRPC_REACTOR_ORDER_H_
#define DLLM_SERVER_GRPC_REACTOR_ORDER_H_

#include "absl/base/config.h"

#ifdef ABSL_HAVE_THREAD_SANITIZER
#include <sanitizer/tsan_interface.h>
#endif

namespace dllm {

// Call at the end of a reaction, and just before Finish.
inline void ReactionEnded([[maybe_unused]] const void* reactor) {
#ifdef ABSL_HAVE_THREAD_SANITIZER
  __tsan_release(const_cast<void*>(reactor));
#endif
}

// Call first thing in OnDone.
inline void OnDoneStarted([[maybe_unused]] const void* reactor) {
#ifdef ABSL_HAVE_THREAD_SANITIZER
  __tsan_acquire(const_cast<void*>(reactor));
#endif
}

}  // namespace dllm

#endif  // DLLM_SERVER_GRPC_REACTOR_ORDER_H_
