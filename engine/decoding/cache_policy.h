// Cache policies: per sequence, whether the next step is a full refresh or a partial step,
// and which query rows a partial step recomputes (docs/method.md §3).
//
//   none      every step full (vanilla).
//   entropy   EntropyCache: the first step is full; after step t, E = max entropy of the
//             tokens committed in step t; E > tau => step t+1 full, else partial over the
//             decoder's candidate set ∪ the recent-k committed tokens. A step that commits
//             nothing (Dream's first timestep, a Bernoulli draw of zero) leaves the canvas
//             as the cache saw it, so it counts as E = 0, entropy's floor: partial for any
//             tau >= 0 (a refresh would recompute the same K/V), still full for tau < 0.
//   dual      Fast-dLLM DualCache: full on the first step of every block; in between the
//             current block's rows [block_begin, block_end). Requires the block schedule.
//   interval  full every `refresh_interval` steps (steps 0, n, 2n, ...), entropy's partial
//             step in between.
//   prefix    Fast-dLLM PrefixCache: full on the first step of every block; in between the
//             rows [block_begin, canvas_end): the current block and every later (masked)
//             position, so only the prefix before the block is read from the cache. A
//             superset of dual's rows. Requires the block schedule.
//   d2cache   d2Cache: full on the first step only; then masks ranked by certainty density,
//             the previous step's commits and the attention-rollout nucleus
//             (d2cache_policy.h). Asks the forward for attention maps.
//   elastic   Elastic-Cache: full on the first step only; then the candidates, the previous
//             step's commits and the most-attended tokens, with the deep layers recomputed
//             for every row when attention drifts (elastic_policy.h). Attention maps and
//             hidden-state slabs.
//
// Recent-k: committed tokens ranked by commit step, newest step first, ties within a step by
// ascending position; the first k are taken, and the whole newest step is always included
// (their cached K/V still encode [MASK], docs/method.md §8.4), so k = 0 refreshes exactly
// the previous step's commits. cache.recent_min_entropy (our variant, docs/method.md) drops
// from the older ones those committed with less entropy than it: a confident token's K/V
// settle once recomputed. cache.recent_max_end (a second variant) keeps at most that many
// of the older ones that are end tokens, the newest first: the end tokens that pad the canvas
// after the answer move least (docs/entropy-drift.md).
//
// Query rows are prediction positions; for a shifted-logit model (Dream) the planner adds
// row p-1 of every predicted p (see PlanQueryRows). Thread-safety: none (engine worker).
#ifndef DLLM_ENGINE_DECODING_CACHE_POLICY_H_
#define DLLM_ENGINE_DECODING_CACHE_POLICY_H_

#include <cstdint>
#include <limits>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "engine/core/attention_maps.h"
#include "engine/core/params.h"
#include "engine/core/row_stats.h"
#include "engine/decoding/decoder.h"

namespace dllm {

// What the policy sees of the decoder before a step.
struct PlanInput {
  int step = 0;                         // the coming step's index
  std::span<const int32_t> candidates;  // ascending masks the step may commit
  bool block_start = false;             // first step of a block (kBlock)
  int32_t block_begin = 0;              // current block / window span
  int32_t block_end = 0;
  int32_t canvas_end = 0;    // one past the last canvas position (prompt, answer, suffix)
  int32_t answer_begin = 0;  // the prompt's length: the first answer position
  int32_t answer_end = 0;    // one past the last answer position (canvas_end without a suffix)
  int32_t block_length = 0;  // the block schedule's block length; else the answer's
  std::span<const uint8_t> decided;  // per canvas position: nonzero once decided (prompt too)
  float tau_scale = 1.0f;            // > 0; multiplies entropy's tau (the engine's autotuner)
  // The worker switched the sequence to its tau under load (cache.entropy_threshold_under_load;
  // entropy only: engine/scheduler/worker.h). Any step may be the first with it set.
  bool under_load = false;
  // In (0, 1]: the switch's quality budget (ShadowSteps::load_tau_scale), see TauUnderLoad.
  float load_tau_scale = 1.0f;
};

// The τ a switched EntropyCache sequence plans with, before PlanInput::tau_scale: its τ under
// load times `load_tau_scale` (in (0, 1]), which the quality budget lowers while switched
// steps commit tokens a full step would not. The budget can take the switch back down to the
// request's own τ, never past it: the result is at least min(tau, tau_under_load). (An
// infinite τ under load stays infinite: no scale brings it back.)
float TauUnderLoad(float tau, float tau_under_load, float load_tau_scale);

// The τ an EntropyCache step plans with: `tau`, or TauUnderLoad for a switched sequence
// (input.under_load), times input.tau_scale. `tau_under_load`: cache.entropy_threshold_under_load,
// else `tau`.
float PlannedTau(float tau, float tau_under_load, const PlanInput& input);

struct StepPlan {
  bool full = true;
  // Partial steps only: ascending unique positions whose rows are recomputed (before any
  // logit-shift rows are added).
  std::vector<int32_t> query_positions;
};

// Which of the recent-k tokens committed before the newest step are left out. The defaults
// leave none out (the paper's partial step).
struct RecentFilter {
  float min_entropy_nats = 0.0f;  // keep those committed with at least this entropy
  int max_end_tokens = std::numeric_limits<int>::max();  // and at most this many end tokens
};

// Committed tokens by step, with the recent-k selection.
class CommitHistory {
 public:
  // Records one step's commits (any order).
  void Record(int step, std::span<const CommittedToken> committed);
  // Positions of the recent-k selection (see file comment), ascending, less what `filter`
  // leaves out of the tokens committed before the newest step. The filter applies to the
  // ranking's first k; it never reaches past them.
  std::vector<int32_t> Recent(int k, const RecentFilter& filter = {}) const;

 private:
  struct Commit {
    int32_t position;
    float entropy_nats;
    bool end_token;
    bool operator<(const Commit& o) const { return position < o.position; }
  };
  struct StepCommits {
    int step;
    std::vector<Commit> tokens;  // ascending position
  };
  std::vector<StepCommits> steps_;  // in commit order (ascending step)
};

// What the forward of a planned step computed, for policies that decide from it.
struct ForwardOutcome {
  std::span<const int32_t> query_rows;  // rows the forward computed, ascending
  std::span<const RowStats> predicted;  // one per predicted position
  // The query rows' attention when the policy asked for it; null or empty otherwise (an
  // executor without attention maps).
  const AttentionMaps* attention = nullptr;
  // 0: the step's forward; > 0: the second pass that RecomputeFromLayer asked for (every row,
  // layers [first_layer, L); the maps' shallower layers are zero).
  int first_layer = 0;
};

class CachePolicy {
 public:
  virtual ~CachePolicy() = default;
  // The plan of the coming step.
  virtual StepPlan Plan(const PlanInput& input) = 0;
  // Whether the forward of each step should compute attention maps for ObserveForward.
  virtual bool WantsAttentionMaps() const { return false; }
  // After the forward of a planned step, before Observe of the same step.
  virtual void ObserveForward(const ForwardOutcome& outcome) {}
  // After ObserveForward of a step's forward: > 0 asks for the step's layers
  // [n, num_layers) to be run again over every row, from the inputs the slab's hidden states
  // hold (elastic); its predictions replace the step's and come back through ObserveForward
  // with first_layer = n. 0: none.
  virtual int RecomputeFromLayer() const { return 0; }
  // The outcome of step `step`: the tokens it committed (possibly none).
  virtual void Observe(int step, std::span<const CommittedToken> committed) = 0;
};

// Whether the policy's sequences need KV slabs with hidden states (elastic).
inline bool NeedsHiddenStates(const CacheParams& params) {
  return params.policy == CachePolicyKind::kElastic;
}

// Host memory that a sequence of `positions` positions may hold for its policy's decisions
// beyond its K/V slab, at most: d2cache and elastic keep the head-averaged attention maps of a
// step's rows (a full step: [num_layers][positions][positions] floats), and elastic also the
// map rows of the tokens it tracks (at most as much again). Counted in the sequence's share of
// the KV budget at admission, so that these policies cannot exhaust memory outside it (a
// 32-layer model at 4,096 positions: 2 GiB of maps per sequence).
int64_t PolicyStateBytes(const CacheParams& params, int num_layers, int positions);

// The policy for `params`; parameters are validated by the caller. `vocab_size` is the
// model's (d2cache's confidence of a mask it has not predicted yet is 1 / vocab_size).
std::unique_ptr<CachePolicy> MakeCachePolicy(const CacheParams& params, int vocab_size);

// Sorted union of a and b.
std::vector<int32_t> UnionSorted(std::span<const int32_t> a, std::span<const int32_t> b);

// The forward's query rows for a plan over a canvas of `canvas_length` positions: all
// positions for a full step; otherwise the plan's rows plus, when `shift_logits`, row p-1 of
// every predicted position p (p >= 1).
std::vector<int32_t> PlanQueryRows(const StepPlan& plan, std::span<const int32_t> predict,
                                   int canvas_length, bool shift_logits);

}  // namespace dllm

#endif  // DLLM_ENGINE_DECODING_CACHE_POLICY_H_
