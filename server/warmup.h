// Warm-up: one tiny generation through the real engine before the server reports SERVING,
// so that readiness means "can generate" (not merely "weights are loaded"), and a sanity check
// of what it generated, so that a checkpoint whose bytes are intact in shape but carry no
// model (overwritten with zeros while the server loaded it) stops start-up
// instead of answering token 0 (NUL bytes) to every request.
#ifndef DLLM_SERVER_WARMUP_H_
#define DLLM_SERVER_WARMUP_H_

#include <span>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "engine/engine.h"

namespace dllm {

// A committed token's distribution counts as uniform when its entropy is within this many
// nats of ln(vocab_size), the maximum. All-zero weights give exactly uniform logits (gap 0 up
// to float rounding, ~1e-6 nats); the shipped and fixture models' warm-up tokens have gaps
// above 0.5 nats; a gap of 1e-3 nats needs logits whose spread is about 0.045 (std), which
// no trained model produces over its whole vocabulary.
inline constexpr double kWarmupUniformGapNats = 1e-3;

// Generates a few tokens from a short prompt and waits up to `timeout`. OK when the engine
// finished the request normally (length or eos) and CheckWarmupOutput accepts what it
// committed; otherwise the engine's error (non-finite logits among them), DEADLINE_EXCEEDED,
// or CheckWarmupOutput's error.
absl::Status RunWarmup(Engine& engine, absl::Duration timeout);

// The sanity check on the warm-up's output: `committed_entropy_nats` holds the entropy of
// each committed token's distribution (CommitEvent::entropy_nats) over a vocabulary of
// `vocab_size` ids. DATA_LOSS "warm-up: the model's output is degenerate: ..." when every one
// is uniform (see kWarmupUniformGapNats) or any is not finite; INTERNAL when none was
// committed. A check on outputs, not weights: reading 16 GB of weights again to look for
// zeros would double the load time, while one generation already exercises every tensor.
absl::Status CheckWarmupOutput(int vocab_size, std::span<const float> committed_entropy_nats);

}  // namespace dllm

#endif  // DLLM_SERVER_WARMUP_H_
