#include "engine/core/clock.h"

namespace dllm {
namespace {

class SystemClockImpl final : public Clock {
 public:
  absl::Time Now() const override { return absl::Now(); }
};

}  // namespace

const Clock& SystemClock() {
  static const SystemClockImpl clock;
  return clock;
}

}  // namespace dllm
