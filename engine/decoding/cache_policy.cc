#include "engine/decoding/cache_policy.h"

#include <algorithm>
#include <numeric>

#include "engine/decoding/d2cache_policy.h"
#include "engine/decoding/elastic_policy.h"

namespace dllm {

void CommitHistory::Record(int step, std::span<const CommittedToken> committed) {
  if (committed.empty()) return;
  StepCommits entry{step, {}};
  entry.tokens.reserve(committed.size());
  for (const CommittedToken& c : committed) {
    entry.tokens.push_back(Commit{c.position, c.entropy_nats, c.end_token});
  }
  std::sort(entry.tokens.begin(), entry.tokens.end());
  steps_.push_back(std::move(entry));
}

std::vector<int32_t> CommitHistory::Recent(int k, const RecentFilter& filter) const {
  std::vector<int32_t> out;
  int taken = 0;       // the ranking's first k, counted before the filter
  int end_tokens = 0;  // older end tokens kept so far
  for (auto it = steps_.rbegin(); it != steps_.rend(); ++it) {
    const bool newest = it == steps_.rbegin();
    for (const Commit& c : it->tokens) {
      if (!newest && taken >= k) break;
      ++taken;
      if (!newest) {
        if (c.entropy_nats < filter.min_entropy_nats) continue;
        if (c.end_token && end_tokens++ >= filter.max_end_tokens) continue;
      }
      out.push_back(c.position);
    }
    if (taken >= k) break;
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<int32_t> UnionSorted(std::span<const int32_t> a, std::span<const int32_t> b) {
  std::vector<int32_t> out;
  out.reserve(a.size() + b.size());
  std::set_union(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(out));
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::vector<int32_t> PlanQueryRows(const StepPlan& plan, std::span<const int32_t> predict,
                                   int canvas_length, bool shift_logits) {
  std::vector<int32_t> rows;
  if (plan.full) {
    rows.resize(canvas_length);
    std::iota(rows.begin(), rows.end(), 0);
    return rows;
  }
  if (!shift_logits) return plan.query_positions;
  std::vector<int32_t> shifted;
  shifted.reserve(predict.size());
  for (int32_t p : predict)
    if (p >= 1) shifted.push_back(p - 1);
  return UnionSorted(plan.query_positions, shifted);
}

namespace {

class NonePolicy final : public CachePolicy {
 public:
  StepPlan Plan(const PlanInput&) override { return StepPlan{true, {}}; }
  void Observe(int, std::span<const CommittedToken>) override {}
};

// Shared by entropy and interval: the EntropyCache partial step.
class RecentKPolicy : public CachePolicy {
 public:
  explicit RecentKPolicy(const CacheParams& params) : recent_k_(params.recent_k) {
    filter_.min_entropy_nats = params.recent_min_entropy.value_or(0.0f);
    if (params.recent_max_end) filter_.max_end_tokens = *params.recent_max_end;
  }
  void Observe(int step, std::span<const CommittedToken> committed) override {
    history_.Record(step, committed);
  }

 protected:
  StepPlan Partial(const PlanInput& input) const {
    const std::vector<int32_t> recent = history_.Recent(recent_k_, filter_);
    return StepPlan{false, UnionSorted(input.candidates, recent)};
  }

 private:
  int recent_k_;
  RecentFilter filter_;
  CommitHistory history_;
};

class EntropyPolicy final : public RecentKPolicy {
 public:
  explicit EntropyPolicy(const CacheParams& params)
      : RecentKPolicy(params),
        tau_(params.entropy_threshold),
        tau_under_load_(params.entropy_threshold_under_load.value_or(params.entropy_threshold)) {}
  StepPlan Plan(const PlanInput& input) override {
    if (first_ || max_entropy_ > PlannedTau(tau_, tau_under_load_, input)) {
      return StepPlan{true, {}};
    }
    return Partial(input);
  }
  void Observe(int step, std::span<const CommittedToken> committed) override {
    RecentKPolicy::Observe(step, committed);
    first_ = false;
    max_entropy_ = 0.0f;  // entropy's floor; what an empty commit set counts as
    for (const CommittedToken& c : committed) {
      max_entropy_ = std::max(max_entropy_, c.entropy_nats);
    }
  }

 private:
  float tau_;
  float tau_under_load_;  // cache.entropy_threshold_under_load, else tau_
  bool first_ = true;     // the first step fills an empty cache
  float max_entropy_ = 0.0f;
};

class IntervalPolicy final : public RecentKPolicy {
 public:
  explicit IntervalPolicy(const CacheParams& params)
      : RecentKPolicy(params), interval_(params.refresh_interval) {}
  StepPlan Plan(const PlanInput& input) override {
    if (input.step % interval_ == 0) return StepPlan{true, {}};
    return Partial(input);
  }

 private:
  int interval_;
};

// Dual and prefix: a full step at every block start, then rows [block_begin, end) where end
// is the block's end (dual) or the canvas's (prefix).
class BlockRefreshPolicy final : public CachePolicy {
 public:
  explicit BlockRefreshPolicy(bool through_canvas_end) : through_canvas_end_(through_canvas_end) {}
  StepPlan Plan(const PlanInput& input) override {
    if (input.block_start || input.step == 0) return StepPlan{true, {}};
    StepPlan plan{false, {}};
    const int32_t end = through_canvas_end_ ? input.canvas_end : input.block_end;
    for (int32_t p = input.block_begin; p < end; ++p) plan.query_positions.push_back(p);
    return plan;
  }
  void Observe(int, std::span<const CommittedToken>) override {}

 private:
  bool through_canvas_end_;
};

}  // namespace

float TauUnderLoad(float tau, float tau_under_load, float load_tau_scale) {
  return std::max(tau_under_load * load_tau_scale, std::min(tau, tau_under_load));
}

float PlannedTau(float tau, float tau_under_load, const PlanInput& input) {
  return (input.under_load ? TauUnderLoad(tau, tau_under_load, input.load_tau_scale) : tau) *
         input.tau_scale;
}

int64_t PolicyStateBytes(const CacheParams& params, int num_layers, int positions) {
  const int64_t maps_bytes =
      int64_t{num_layers} * positions * positions * static_cast<int64_t>(sizeof(float));
  switch (params.policy) {
    case CachePolicyKind::kD2Cache:
      return maps_bytes;
    case CachePolicyKind::kElastic:
      return 2 * maps_bytes;
    default:
      return 0;
  }
}

std::unique_ptr<CachePolicy> MakeCachePolicy(const CacheParams& params, int vocab_size) {
  switch (params.policy) {
    case CachePolicyKind::kNone:
      return std::make_unique<NonePolicy>();
    case CachePolicyKind::kEntropy:
      return std::make_unique<EntropyPolicy>(params);
    case CachePolicyKind::kDual:
      return std::make_unique<BlockRefreshPolicy>(/*through_canvas_end=*/false);
    case CachePolicyKind::kPrefix:
      return std::make_unique<BlockRefreshPolicy>(/*through_canvas_end=*/true);
    case CachePolicyKind::kInterval:
      return std::make_unique<IntervalPolicy>(params);
    case CachePolicyKind::kD2Cache:
      return MakeD2CachePolicy(params.d2_current_k, params.d2_rollout_p, params.d2_sigma,
                               vocab_size);
    case CachePolicyKind::kElastic:
      return MakeElasticPolicy(params.elastic_gamma);
  }
  return std::make_unique<NonePolicy>();
}

}  // namespace dllm
