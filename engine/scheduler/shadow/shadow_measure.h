// Shadow measurements: how far a partial (cached) step was from the full step it
// approximates.
//
// ShadowSteps runs a sampled partial step as usual, then a full forward of the same canvas
// into a scratch slab (StepExecutor::RunShadow), and turns both into one ShadowSample
// (engine/shadow_sampling.h) with MeasureShadow:
//   - KL(full || partial) of every predicted row's softmax (fp32 logits, computed in double);
//   - decision mismatch: the commits the decoder would make from the full rows differ (in
//     positions or tokens) from the ones it makes from the partial rows;
//   - token mismatch: a token the partial step commits differs from the token the full rows
//     propose at that position;
//   - the largest |p_partial(t) - p_full(t)| over the tokens t the partial step commits;
//   - relative L2 drift of the cached K/V against the fresh ones, by region (see
//     ShadowRegion) and layer third.
// Pure functions of their inputs, so they are tested against independent references (and
// thread-safe).
#ifndef DLLM_ENGINE_SCHEDULER_SHADOW_SHADOW_MEASURE_H_
#define DLLM_ENGINE_SCHEDULER_SHADOW_SHADOW_MEASURE_H_

#include <cstdint>
#include <span>
#include <vector>

#include "engine/core/row_stats.h"
#include "engine/decoding/decoder.h"
#include "engine/model/forward_inspection.h"
#include "engine/shadow_sampling.h"

namespace dllm {

// KL(p || q) in nats of softmax(p_logits) and softmax(q_logits); same length.
double KlDivergence(std::span<const float> p_logits, std::span<const float> q_logits);

// softmax(logits)[token], computed in double.
double SoftmaxProbability(std::span<const float> logits, int32_t token);

// Layer third (ShadowLayerGroup) of layer `layer` out of `layers`: min(2, layer * 3 / layers).
int ShadowLayerThird(int layer, int layers);

// The region of every canvas position for a partial step: recomputed when it is a query
// row; else prompt (< prompt_length), decoded_old (decided answer position) or
// masks_outside. `query_rows` ascending; `decided[p]` != 0 for decided positions.
std::vector<int8_t> ShadowRegions(int canvas_length, int prompt_length,
                                  std::span<const uint8_t> decided,
                                  std::span<const int32_t> query_rows);

// Drift of the positions whose region is `region`, over the layers of third `group`
// (ShadowLayerThird; -1: all layers).
KvDrift AggregateKvDrift(const KvSquaredDiffs& kv, std::span<const int8_t> regions, int region,
                         int group);

// Whether two commit sets differ in any position or token (both ascending by position).
bool CommitsDiffer(std::span<const CommittedToken> a, std::span<const CommittedToken> b);

struct ShadowInputs {
  std::span<const int32_t> predict_positions;
  std::span<const std::vector<float>> partial_logits;  // one row per predict position
  std::span<const std::vector<float>> full_logits;
  std::span<const CommittedToken> partial_commit;  // what the step commits
  std::span<const CommittedToken> full_commit;     // what a full step would have committed
  // The full forward's rows, one per predict position; their RowStats::token is what a full
  // step proposes (empty: no token mismatch).
  std::span<const RowStats> full_rows;
  std::span<const int8_t> regions;  // ShadowRegions
  const KvSquaredDiffs* kv = nullptr;
};

// Fills every measured field of the sample (not request_id, step, entropy or seconds).
// INVALID_ARGUMENT-free by contract: sizes must agree (checked by the caller).
void MeasureShadow(const ShadowInputs& in, ShadowSample* sample);

}  // namespace dllm

#endif  // DLLM_ENGINE_SCHEDULER_SHADOW_SHADOW_MEASURE_H_
