#include "engine/decoding/d2cache_policy.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "engine/decoding/attention_rollout.h"

namespace dllm {

std::vector<double> CertaintyDensity(std::span<const uint8_t> decided, double sigma) {
  const int G = static_cast<int>(decided.size());
  std::vector<double> density(decided.size(), 0.0);
  if (G == 0) return density;
  // The kernel is negligible (< 1e-30) beyond 12 sigma; the padding is as wide as that.
  const int reach = static_cast<int>(std::ceil(12.0 * sigma));
  std::vector<double> g(static_cast<size_t>(reach) + 1);
  for (int n = 0; n <= reach; ++n) g[n] = std::exp(-double(n) * n / (2.0 * sigma * sigma));
  double norm = g[0];
  for (int n = 1; n <= reach; ++n) norm += 2.0 * g[n];
  const bool far_side = decided[G - 1] != 0;
  for (int i = 0; i < G; ++i) {
    double sum = 0;
    for (int j = i - reach; j <= i + reach; ++j) {
      const bool d = j < 0 ? true : (j >= G ? far_side : decided[j] != 0);
      if (d) sum += g[std::abs(i - j)];
    }
    density[i] = sum / norm;
  }
  return density;
}

namespace {

class D2CachePolicy final : public CachePolicy {
 public:
  D2CachePolicy(int current_k, float rollout_p, float sigma, int vocab_size)
      : current_k_(current_k),
        rollout_p_(rollout_p),
        sigma_(sigma),
        unseen_confidence_(vocab_size > 0 ? 1.0f / static_cast<float>(vocab_size) : 0.0f) {}

  bool WantsAttentionMaps() const override { return true; }

  StepPlan Plan(const PlanInput& input) override {
    if (first_) return StepPlan{true, {}};
    const int T = input.canvas_end;
    std::vector<uint8_t> selected(static_cast<size_t>(T), 0);
    for (int32_t p : input.candidates) selected[p] = 1;
    for (int32_t p : last_commits_) selected[p] = 1;
    for (int32_t p : MaskedByCertaintyDensity(input)) selected[p] = 1;
    if (importance_.size() == static_cast<size_t>(T)) {
      for (int32_t p : NucleusSelect(importance_, selected, rollout_p_)) selected[p] = 1;
    }
    StepPlan plan{false, {}};
    for (int32_t p = 0; p < T; ++p) {
      if (selected[p]) plan.query_positions.push_back(p);
    }
    return plan;
  }

  void ObserveForward(const ForwardOutcome& outcome) override {
    for (const RowStats& r : outcome.predicted) {
      if (r.position >= static_cast<int32_t>(confidence_.size())) {
        confidence_.resize(static_cast<size_t>(r.position) + 1, -1.0f);
      }
      confidence_[r.position] = r.argmax_prob;
    }
    if (outcome.attention != nullptr && !outcome.attention->empty()) {
      importance_ = RolloutImportance(*outcome.attention, outcome.query_rows);
    } else {
      importance_.clear();  // no maps (a fake executor): no nucleus next step
    }
  }

  void Observe(int, std::span<const CommittedToken> committed) override {
    first_ = false;
    last_commits_.clear();
    for (const CommittedToken& c : committed) last_commits_.push_back(c.position);
  }

 private:
  float Confidence(int32_t position) const {
    if (position < static_cast<int32_t>(confidence_.size()) && confidence_[position] >= 0.0f) {
      return confidence_[position];
    }
    return unseen_confidence_;
  }

  std::vector<int32_t> MaskedByCertaintyDensity(const PlanInput& input) const {
    const int32_t a0 = input.answer_begin;
    const int G = input.answer_end - a0;
    if (G <= 0) return {};
    std::span<const uint8_t> decided = input.decided.subspan(a0, G);
    // The search range: from the current block's start to the block end at or after the
    // position where current_k masks have been counted (or the answer's end).
    int min_end = G - 1;
    for (int i = 0, count = 0; i < G; ++i) {
      if (!decided[i] && ++count >= current_k_) {
        min_end = i;
        break;
      }
    }
    const int block = std::max(1, input.block_length);
    const int search_end = std::min(G - 1, (min_end / block + 1) * block - 1);
    const int search_begin = std::clamp(input.block_begin - a0, 0, G);
    const std::vector<double> density = CertaintyDensity(decided, sigma_);
    std::vector<double> score(static_cast<size_t>(G));
    double max_score = 0;
    for (int i = 0; i < G; ++i) {
      score[i] = double(Confidence(a0 + i)) * density[i];
      max_score = std::max(max_score, score[i]);
    }
    for (int i = std::max(0, input.block_begin - a0); i < std::min(G, input.block_end - a0); ++i) {
      score[i] += max_score;
    }
    std::vector<int32_t> pool;
    for (int i = search_begin; i <= search_end; ++i) {
      if (!decided[i]) pool.push_back(i);
    }
    const size_t k = std::min<size_t>(pool.size(), static_cast<size_t>(current_k_));
    std::stable_sort(pool.begin(), pool.end(),
                     [&](int32_t a, int32_t b) { return score[a] > score[b]; });
    std::vector<int32_t> out;
    out.reserve(k);
    for (size_t i = 0; i < k; ++i) out.push_back(a0 + pool[i]);
    return out;
  }

  int current_k_;
  float rollout_p_;
  float sigma_;
  float unseen_confidence_;
  bool first_ = true;
  std::vector<float> confidence_;  // per canvas position; < 0: never predicted
  std::vector<double> importance_;
  std::vector<int32_t> last_commits_;
};

}  // namespace

std::unique_ptr<CachePolicy> MakeD2CachePolicy(int current_k, float rollout_p, float sigma,
                                               int vocab_size) {
  return std::make_unique<D2CachePolicy>(current_k, rollout_p, sigma, vocab_size);
}

}  // namespace dllm
