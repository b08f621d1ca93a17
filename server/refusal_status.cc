#include "server/refusal_status.h"

#include "server/engine_request_link.h"

namespace dllm {

absl::Status RefusalStatus(absl::Time now, absl::Time deadline, bool cancelled,
                           bool message_arrived, const absl::Status& refusal) {
  const bool client_gone = cancelled || !message_arrived;
  if (now >= deadline || (client_gone && !EngineRequestLink::ForwardsCancel(now, deadline))) {
    return absl::DeadlineExceededError("deadline exceeded before the request reached the engine");
  }
  if (cancelled) return absl::CancelledError("cancelled before the request reached the engine");
  return refusal;
}

}  // namespace dllm
