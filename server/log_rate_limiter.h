// LogRateLimiter: caps how many lines of one kind are written per second.
//
// A storm of rejected calls (queue full, bad token, ...) used to write one WARNING line per
// call (23 MB in 27 s). Metrics still count every call; the log keeps the first `burst`
// lines of each one-second window and reports how many it suppressed in the next line it
// lets through.
//
// Thread-safety: Admit may be called from any thread.
#ifndef DLLM_SERVER_LOG_RATE_LIMITER_H_
#define DLLM_SERVER_LOG_RATE_LIMITER_H_

#include <cstdint>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace dllm {

class LogRateLimiter {
 public:
  explicit LogRateLimiter(int burst_per_second) : burst_(burst_per_second) {}

  // True when a line may be written at `now`; then *suppressed gets the number of lines
  // refused since the last admitted one (0 if none).
  bool Admit(absl::Time now, int64_t* suppressed);

 private:
  const int burst_;
  absl::Mutex mu_;
  absl::Time window_start_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  int in_window_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t suppressed_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace dllm

#endif  // DLLM_SERVER_LOG_RATE_LIMITER_H_
