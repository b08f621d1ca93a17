// Warm-up: one tiny generation through the real engine before the server reports SERVING,
// so that readiness means "can generate" (not merely "weights are mapped").
#ifndef DLLM_SERVER_WARMUP_H_
#define DLLM_SERVER_WARMUP_H_

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "engine/engine.h"

namespace dllm {

// Generates a few tokens from a short prompt and waits up to `timeout`. OK when the engine
// finished the request normally (length or eos); otherwise the engine's error, or
// DEADLINE_EXCEEDED.
absl::Status RunWarmup(Engine& engine, absl::Duration timeout);

}  // namespace dllm

#endif  // DLLM_SERVER_WARMUP_H_
