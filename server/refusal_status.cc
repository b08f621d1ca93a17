#include "server/refusal_status.h"

#include "server/engine_request_link.h"

namespace dllm {

absl::Status RefusalStatus(absl::Time now, absl::Time deadline, bool cancelled,
                           const absl::Status& refusal) {
  if (now >= deadline || (cancelled && !EngineRequestLink::ForwardsCancel(now, deadline))) {
    return absl::DeadlineExceededError("deadline exceeded before the request reached the engine");
  }
  if (cancelled) return absl::CancelledError("cancelled before the request reached the engine");
  return refusal;
}

}  // namespace dllm
