#include "server/log_rate_limiter.h"

namespace dllm {

bool LogRateLimiter::Admit(absl::Time now, int64_t* suppressed) {
  absl::MutexLock lock(&mu_);
  if (now - window_start_ >= absl::Seconds(1)) {
    window_start_ = now;
    in_window_ = 0;
  }
  if (in_window_ >= burst_) {
    ++suppressed_;
    return false;
  }
  ++in_window_;
  *suppressed = suppressed_;
  suppressed_ = 0;
  return true;
}

}  // namespace dllm
