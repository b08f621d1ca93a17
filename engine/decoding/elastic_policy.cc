#include "engine/decoding/elastic_policy.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <vector>

namespace dllm {
namespace {

double Cosine(std::span<const float> a, std::span<const float> b) {
  double ab = 0, aa = 0, bb = 0;
  for (size_t j = 0; j < a.size(); ++j) {
    ab += double(a[j]) * b[j];
    aa += double(a[j]) * a[j];
    bb += double(b[j]) * b[j];
  }
  if (aa == 0 || bb == 0) return 1.0;  // no attention to compare: no evidence of drift
  return ab / std::sqrt(aa * bb);
}

class ElasticPolicy final : public CachePolicy {
 public:
  explicit ElasticPolicy(float gamma) : gamma_(gamma) {}

  bool WantsAttentionMaps() const override { return true; }

  StepPlan Plan(const PlanInput& input) override {
    masked_.assign(input.decided.size(), 0);
    for (size_t p = 0; p < input.decided.size(); ++p) masked_[p] = input.decided[p] == 0;
    if (first_) return StepPlan{true, {}};
    std::vector<int32_t> rows(input.candidates.begin(), input.candidates.end());
    rows.insert(rows.end(), last_commits_.begin(), last_commits_.end());
    rows.insert(rows.end(), tracked_.begin(), tracked_.end());
    std::sort(rows.begin(), rows.end());
    rows.erase(std::unique(rows.begin(), rows.end()), rows.end());
    return StepPlan{false, std::move(rows)};
  }

  void ObserveForward(const ForwardOutcome& outcome) override {
    const AttentionMaps* maps = outcome.attention;
    recompute_from_ = 0;
    if (maps == nullptr || maps->empty()) return;  // an executor without maps: a plain cache
    const std::map<int32_t, int> row_of = RowOf(outcome.query_rows);
    if (outcome.first_layer > 0) {
      Remember(*maps, row_of, outcome.first_layer);
      return;
    }
    recompute_from_ = DriftLayer(*maps, row_of);
    Track(*maps, row_of, outcome.predicted);
    Remember(*maps, row_of, 0);
  }

  int RecomputeFromLayer() const override { return recompute_from_; }

  void Observe(int, std::span<const CommittedToken> committed) override {
    first_ = false;
    last_commits_.clear();
    for (const CommittedToken& c : committed) last_commits_.push_back(c.position);
  }

 private:
  // Row r of the maps for each query position.
  static std::map<int32_t, int> RowOf(std::span<const int32_t> query_rows) {
    std::map<int32_t, int> row_of;
    for (size_t r = 0; r < query_rows.size(); ++r) row_of[query_rows[r]] = static_cast<int>(r);
    return row_of;
  }

  // 1 + the first layer whose mean similarity is below gamma, or 0 (none, or the last layer:
  // nothing deeper to recompute).
  int DriftLayer(const AttentionMaps& maps, const std::map<int32_t, int>& row_of) const {
    for (int l = 0; l < maps.layers; ++l) {
      double sum = 0;
      int count = 0;
      for (int32_t t : tracked_) {
        auto prev = previous_.find(t);
        auto row = row_of.find(t);
        if (prev == previous_.end() || row == row_of.end()) continue;
        const std::span<const float> before(
            prev->second.data() + static_cast<size_t>(l) * maps.positions, maps.positions);
        sum += Cosine(before, maps.Row(l, row->second));
        ++count;
      }
      if (count > 0 && sum / count < gamma_) return l + 1 < maps.layers ? l + 1 : 0;
    }
    return 0;
  }

  // The tracked tokens of the next step: per layer, the non-mask key with the most attention
  // from the window's (predicted positions') rows; ties to the lower position.
  void Track(const AttentionMaps& maps, const std::map<int32_t, int>& row_of,
             std::span<const RowStats> predicted) {
    std::vector<int> window;
    for (const RowStats& r : predicted) {
      auto it = row_of.find(r.position);
      if (it != row_of.end()) window.push_back(it->second);
    }
    if (window.empty()) return;
    std::vector<int32_t> tracked;
    std::vector<double> score(static_cast<size_t>(maps.positions));
    for (int l = 0; l < maps.layers; ++l) {
      std::fill(score.begin(), score.end(), 0.0);
      for (int r : window) {
        const std::span<const float> a = maps.Row(l, r);
        for (int j = 0; j < maps.positions; ++j) score[j] += a[j];
      }
      int best = -1;
      for (int j = 0; j < maps.positions; ++j) {
        if (j < static_cast<int>(masked_.size()) && masked_[j]) continue;
        if (best < 0 || score[j] > score[best]) best = j;
      }
      if (best >= 0) tracked.push_back(best);
    }
    std::sort(tracked.begin(), tracked.end());
    tracked.erase(std::unique(tracked.begin(), tracked.end()), tracked.end());
    tracked_ = std::move(tracked);
  }

  // Keeps the rows of layers [from, layers) of every tracked token the maps cover; forgets
  // tokens no longer tracked.
  void Remember(const AttentionMaps& maps, const std::map<int32_t, int>& row_of, int from) {
    for (auto it = previous_.begin(); it != previous_.end();) {
      it = std::binary_search(tracked_.begin(), tracked_.end(), it->first) ? std::next(it)
                                                                           : previous_.erase(it);
    }
    const size_t width = static_cast<size_t>(maps.positions);
    for (int32_t t : tracked_) {
      auto row = row_of.find(t);
      if (row == row_of.end()) continue;
      std::vector<float>& keep = previous_[t];
      keep.resize(static_cast<size_t>(maps.layers) * width, 0.0f);
      for (int l = from; l < maps.layers; ++l) {
        const std::span<const float> a = maps.Row(l, row->second);
        std::copy(a.begin(), a.end(), keep.begin() + static_cast<ptrdiff_t>(l * width));
      }
    }
  }

  float gamma_;
  bool first_ = true;
  std::vector<uint8_t> masked_;  // at the latest Plan: 1 for a mask
  std::vector<int32_t> tracked_;
  std::map<int32_t, std::vector<float>> previous_;  // tracked token -> [layers][positions]
  std::vector<int32_t> last_commits_;
  int recompute_from_ = 0;
};

}  // namespace

std::unique_ptr<CachePolicy> MakeElasticPolicy(float gamma) {
  return std::make_unique<ElasticPolicy>(gamma);
}

}  // namespace dllm
