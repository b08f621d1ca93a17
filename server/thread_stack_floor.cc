// Linked into the dllm-server executable only (not into dllm_server), so that it interposes on
// libc's pthread_attr_setstacksize for every library in the process.
//
// Why: glibc carves the process's static TLS out of each thread's stack. Debian's civetweb (the
// prometheus-cpp metrics Exposer) creates its threads with a fixed 100 KB stack; OpenBLAS alone
// has 60 KB of static TLS, and with libcudart's 4 KB (4 KB aligned) the civetweb worker overflowed
// its stack on the first /metrics request (SIGSEGV; measured margin without CUDA: 4-8 KB). Small
// explicit stack requests therefore get room for the static TLS added on top. Requests of 1 MiB
// or more are passed through unchanged; memory is only reserved, not committed.
#include <dlfcn.h>
#include <pthread.h>

#include <cerrno>
#include <climits>
#include <cstddef>

namespace {

using SetStackSizeFn = int (*)(pthread_attr_t*, size_t);

constexpr size_t kSmallStackBytes = size_t{1} << 20;
// Covers OpenBLAS (60 KB) + libcudart (8 KB with alignment) + headroom for future libraries.
constexpr size_t kStaticTlsHeadroomBytes = size_t{256} << 10;

}  // namespace

extern "C" int pthread_attr_setstacksize(pthread_attr_t* attr, size_t stack_bytes) {
  // Thread-safe: initialization of a function-local static is.
  static const SetStackSizeFn real =
      reinterpret_cast<SetStackSizeFn>(dlsym(RTLD_NEXT, "pthread_attr_setstacksize"));
  if (real == nullptr) return ENOSYS;
  // Below PTHREAD_STACK_MIN stays invalid (EINVAL), as the caller asked for.
  if (stack_bytes >= static_cast<size_t>(PTHREAD_STACK_MIN) && stack_bytes < kSmallStackBytes) {
    stack_bytes += kStaticTlsHeadroomBytes;
  }
  return real(attr, stack_bytes);
}
