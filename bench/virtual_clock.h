// VirtualClock: an engine Clock (engine/core/clock.h) whose time moves only when told. The
// serving simulator sets it to each arrival and advances it by the latency model's time per
// step, so deadlines and request timings are in the simulated machine's time.
//
// Thread-safety: Now, Set and elapsed may be called from any thread (one atomic). The
// simulator keeps it monotonic; Set does not check.
#ifndef DLLM_BENCH_VIRTUAL_CLOCK_H_
#define DLLM_BENCH_VIRTUAL_CLOCK_H_

#include <atomic>
#include <cmath>
#include <cstdint>

#include "absl/time/time.h"
#include "engine/core/clock.h"

namespace dllm::bench {

class VirtualClock final : public Clock {
 public:
  // Time 0 is absl::UnixEpoch().
  absl::Time Now() const override {
    return absl::UnixEpoch() + absl::Nanoseconds(ns_.load(std::memory_order_acquire));
  }
  // Seconds since time 0.
  double elapsed_s() const { return 1e-9 * static_cast<double>(ns_.load()); }
  void Set(double seconds) {
    ns_.store(static_cast<int64_t>(std::llround(seconds * 1e9)), std::memory_order_release);
  }

 private:
  std::atomic<int64_t> ns_{0};
};

}  // namespace dllm::bench

#endif  // DLLM_BENCH_VIRTUAL_CLOCK_H_
