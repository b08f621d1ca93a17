// StepBatch and RowStats: the contract between the decoding layer and the forward pass.
//
// One denoising step runs one StepBatch: ragged rows from many sequences. Each sequence
// names the positions whose hidden rows are recomputed this step (all positions for a full
// refresh) and the positions whose *prediction* is wanted. Dream's one-position logit shift
// is handled inside the forward pass: callers always speak of the position being predicted.
// The forward pass returns a few numbers per wanted position, never full logit rows.
#ifndef DLLM_ENGINE_MODEL_STEP_BATCH_H_
#define DLLM_ENGINE_MODEL_STEP_BATCH_H_

#include <cstdint>
#include <span>
#include <vector>

namespace dllm {

class KvSlab;

// How the forward pass turns a logit row into a proposed token.
struct SamplingParams {
  float temperature = 0.0f;  // 0: greedy argmax
  int top_k = 0;             // 0: off
  float top_p = 1.0f;        // 1: off
  uint64_t seed = 0;         // with (position, step), keys the counter-based RNG
};

struct SequenceStep {
  KvSlab* kv = nullptr;                    // the sequence's cache; not owned
  std::span<const int32_t> tokens;         // the whole canvas, length N = kv capacity in use
  std::vector<int32_t> query_positions;    // ascending, unique, in [0, N); all of [0, N) = full
  std::vector<int32_t> predict_positions;  // ascending, unique; positions whose token is wanted
  SamplingParams sampling;
  int32_t step = 0;  // denoising step index, part of the RNG key
};

// Everything the decoder and cache policy need about one predicted position.
struct RowStats {
  int32_t position = 0;
  int32_t argmax_token = 0;  // lowest id among ties, over the full vocabulary
  float argmax_prob = 0;     // softmax(logits)[argmax], temperature 1, full vocabulary
  float entropy_nats = 0;    // -sum p log p of softmax(logits), temperature 1, full vocabulary
  float margin = 0;          // p_top1 - p_top2 of the same distribution
  // Proposed token: the argmax when temperature == 0, else a sample from the tempered,
  // top-k/top-p filtered distribution keyed by (seed, position, step).
  int32_t token = 0;
  float token_prob = 0;  // untempered, unfiltered softmax probability of `token`
};

struct StepBatch {
  std::vector<SequenceStep> sequences;
};

// Output: one vector per sequence, one RowStats per predict position, in the same order.
using StepResult = std::vector<std::vector<RowStats>>;

}  // namespace dllm

#endif  // DLLM_ENGINE_MODEL_STEP_BATCH_H_
