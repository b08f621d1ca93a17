// StepBatch: the contract between the decoding layer and the forward pass.
//
// One denoising step runs one StepBatch: ragged rows from many sequences. Each sequence
// names the positions whose hidden rows are recomputed this step (all positions for a full
// refresh) and the positions whose *prediction* is wanted. Dream's one-position logit shift
// is handled inside the forward pass: callers always speak of the position being predicted.
// The forward pass returns a few numbers per wanted position (RowStats, engine/core/row_stats.h),
// never full logit rows.
#ifndef DLLM_ENGINE_MODEL_STEP_BATCH_H_
#define DLLM_ENGINE_MODEL_STEP_BATCH_H_

#include <cstdint>
#include <span>
#include <vector>

#include "engine/core/attention_maps.h"
#include "engine/core/row_stats.h"

namespace dllm {

class KvSlab;

struct SequenceStep {
  KvSlab* kv = nullptr;                    // the sequence's cache; not owned
  std::span<const int32_t> tokens;         // the whole canvas, length N = kv capacity in use
  std::vector<int32_t> query_positions;    // ascending, unique, in [0, N); all of [0, N) = full
  std::vector<int32_t> predict_positions;  // ascending, unique; positions whose token is wanted
  SamplingParams sampling;
  int32_t step = 0;  // denoising step index, part of the RNG key
  // When set (not owned), the forward also fills it with the head-averaged attention of every
  // query row at every layer (engine/core/attention_maps.h). Changes no result bit.
  AttentionMaps* attention_maps = nullptr;
  // Elastic-Cache; both need a slab with hidden states (KvSlab::has_hidden_states).
  // store_hidden_states: every query row's input to every layer is written to the slab.
  bool store_hidden_states = false;
  // > 0: layers below it are skipped and the query rows' inputs to layer `first_layer` are
  // read from the slab's hidden states (what earlier steps or passes stored). Such a step
  // must be alone in its batch.
  int32_t first_layer = 0;
};

struct StepBatch {
  std::vector<SequenceStep> sequences;
};

// Output: one vector per sequence, one RowStats per predict position, in the same order.
using StepResult = std::vector<std::vector<RowStats>>;

}  // namespace dllm

#endif  // DLLM_ENGINE_MODEL_STEP_BATCH_H_
