// SamplingParams and RowStats: what the forward pass is asked and answers per predicted row.
//
// Core value types: the decoding layer fills SamplingParams and reads RowStats, the model
// passes them through (model/step_batch.h), and the backend computes one from the other
// (Backend::LogitsStats), so they live below all three.
#ifndef DLLM_ENGINE_CORE_ROW_STATS_H_
#define DLLM_ENGINE_CORE_ROW_STATS_H_

#include <array>
#include <cstdint>

namespace dllm {

// How the forward pass turns a logit row into a proposed token.
// Temperatures below this sample as greedy (0). Dividing logits by a smaller one overflows
// float to +-inf for ordinary logits (1 / 1e-39 is already past FLT_MAX), and ties among
// infinities pick arbitrary tokens; at this temperature a logit gap of 1e-5 already outweighs
// the Gumbel noise, so the limit is the argmax anyway. Applies to decoding.temperature and
// to Dream's alg_temp alike.
inline constexpr float kGreedyBelowTemperature = 1e-6f;
inline float EffectiveTemperature(float temperature) {
  return temperature < kGreedyBelowTemperature ? 0.0f : temperature;
}

// Most alternatives a row lists (RowStats::top_tokens); OpenAI's bound on top_logprobs.
inline constexpr int kMaxTopLogprobs = 20;

struct SamplingParams {
  float temperature = 0.0f;  // 0: greedy argmax
  int top_k = 0;             // 0: off
  float top_p = 1.0f;        // 1: off
  uint64_t seed = 0;         // with (position, step), keys the counter-based RNG
  // [0, kMaxTopLogprobs]: how many of the row's most probable tokens RowStats lists with their
  // log-probabilities. 0 costs nothing; n > 0 costs the backend extra passes over the row.
  int top_logprobs = 0;
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
  // log_softmax(logits)[token], temperature 1, full vocabulary: (logit - max) - log(sum of
  // exp(logit - max)) with the sum of `entropy_nats`'s pass (kmath::EntropyStateLogProb).
  float token_logprob = 0;
  // The first SamplingParams::top_logprobs tokens in (logit desc, id asc) order, with their
  // log-probabilities computed like token_logprob; entries past top_count are unspecified.
  int32_t top_count = 0;
  std::array<int32_t, kMaxTopLogprobs> top_tokens{};
  std::array<float, kMaxTopLogprobs> top_logprobs{};
};

}  // namespace dllm

#endif  // DLLM_ENGINE_CORE_ROW_STATS_H_
