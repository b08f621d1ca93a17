// StepClock: a Clock (engine/core/clock.h) that advances 1 ms every time it is read. An engine
// run on it measures step times, and so forecasts completions, from the number of the
// worker's clock reads alone: the same on every machine, under any load.
//
// Thread-safety: Now() may be called from any thread.
#ifndef DLLM_TESTS_SUPPORT_STEP_CLOCK_H_
#define DLLM_TESTS_SUPPORT_STEP_CLOCK_H_

#include <atomic>
#include <cstdint>

#include "absl/time/time.h"
#include "engine/core/clock.h"

namespace dllm::testing {

class StepClock final : public Clock {
 public:
  absl::Time Now() const override {
    return absl::UnixEpoch() + absl::Milliseconds(reads_.fetch_add(1) + 1);
  }

 private:
  mutable std::atomic<int64_t> reads_{0};
};

}  // namespace dllm::testing

#endif  // DLLM_TESTS_SUPPORT_STEP_CLOCK_H_
