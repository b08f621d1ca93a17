// Clock: where the engine reads the time for deadlines and request timings.
//
// Production uses SystemClock() (absl::Now). The serving simulator (bench/serve_sim.cc) passes
// a virtual clock that advances by a latency model's time per step, so the real scheduler
// runs in the time a different machine would take; nothing else in the engine reads the time
// of day for decisions.
//
// Thread-safety: Now may be called from any thread; implementations must allow that.
#ifndef DLLM_ENGINE_CORE_CLOCK_H_
#define DLLM_ENGINE_CORE_CLOCK_H_

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace dllm {

class Clock {
 public:
  virtual ~Clock() = default;
  virtual absl::Time Now() const = 0;
};

// absl::Now(). Stateless; the returned object lives for the whole program.
const Clock& SystemClock();

}  // namespace dllm

#endif  // DLLM_ENGINE_CORE_CLOCK_H_
