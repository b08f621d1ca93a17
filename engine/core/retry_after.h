// How long a caller refused for load should wait before retrying, carried by the refusal's
// absl::Status as a payload, so that it crosses the engine's boundary with the status and the
// transports map it in one place (HTTP Retry-After, gRPC retry pushback). The engine sets it
// on its RESOURCE_EXHAUSTED load refusals (engine/scheduler/worker.h).
#ifndef DLLM_ENGINE_CORE_RETRY_AFTER_H_
#define DLLM_ENGINE_CORE_RETRY_AFTER_H_

#include <optional>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace dllm {

// nullopt for a status without one.
std::optional<absl::Duration> RetryAfter(const absl::Status& status);
// Attaches `wait` (rounded up to a millisecond; negative as 0) to a non-OK `status`.
void SetRetryAfter(absl::Duration wait, absl::Status* status);

}  // namespace dllm

#endif  // DLLM_ENGINE_CORE_RETRY_AFTER_H_
