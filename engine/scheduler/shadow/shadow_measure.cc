#include "engine/scheduler/shadow/shadow_measure.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace dllm {
namespace {

// log-sum-exp of a logits row in double.
double LogSumExp(std::span<const float> logits) {
  double max = -std::numeric_limits<double>::infinity();
  for (float x : logits) max = std::max(max, double(x));
  double sum = 0;
  for (float x : logits) sum += std::exp(double(x) - max);
  return max + std::log(sum);
}

}  // namespace

double KlDivergence(std::span<const float> p_logits, std::span<const float> q_logits) {
  const double lp = LogSumExp(p_logits);
  const double lq = LogSumExp(q_logits);
  double kl = 0;
  for (size_t i = 0; i < p_logits.size(); ++i) {
    const double log_p = double(p_logits[i]) - lp;
    const double log_q = double(q_logits[i]) - lq;
    kl += std::exp(log_p) * (log_p - log_q);
  }
  // Rounding can leave a tiny negative value for identical distributions.
  return std::max(0.0, kl);
}

double SoftmaxProbability(std::span<const float> logits, int32_t token) {
  if (token < 0 || static_cast<size_t>(token) >= logits.size()) return 0.0;
  return std::exp(double(logits[token]) - LogSumExp(logits));
}

int ShadowLayerThird(int layer, int layers) {
  if (layers <= 0) return 0;
  return std::min(2, layer * 3 / layers);
}

std::vector<int8_t> ShadowRegions(int canvas_length, int prompt_length,
                                  std::span<const uint8_t> decided,
                                  std::span<const int32_t> query_rows) {
  std::vector<int8_t> regions(static_cast<size_t>(canvas_length));
  for (int p = 0; p < canvas_length; ++p) {
    if (p < prompt_length) {
      regions[p] = kShadowPrompt;
    } else if (static_cast<size_t>(p) < decided.size() && decided[p] != 0) {
      regions[p] = kShadowDecodedOld;
    } else {
      regions[p] = kShadowMasksOutside;
    }
  }
  for (int32_t q : query_rows) {
    if (q >= 0 && q < canvas_length) regions[q] = kShadowRecomputed;
  }
  return regions;
}

KvDrift AggregateKvDrift(const KvSquaredDiffs& kv, std::span<const int8_t> regions, int region,
                         int group) {
  KvDrift drift;
  double kd = 0, kr = 0, vd = 0, vr = 0;
  const int positions = std::min<int>(kv.positions, static_cast<int>(regions.size()));
  for (int p = 0; p < positions; ++p) drift.positions += regions[p] == region ? 1 : 0;
  for (int l = 0; l < kv.layers; ++l) {
    if (group >= 0 && ShadowLayerThird(l, kv.layers) != group) continue;
    ++drift.layers;
    for (int p = 0; p < positions; ++p) {
      if (regions[p] != region) continue;
      const size_t i = static_cast<size_t>(l) * kv.positions + p;
      kd += kv.k_diff[i];
      kr += kv.k_ref[i];
      vd += kv.v_diff[i];
      vr += kv.v_ref[i];
    }
  }
  if (drift.positions == 0 || drift.layers == 0) return drift;
  auto rel = [](double d, double r) { return r > 0 ? std::sqrt(d / r) : (d > 0 ? 1.0 : 0.0); };
  drift.k = rel(kd, kr);
  drift.v = rel(vd, vr);
  drift.kv = rel(kd + vd, kr + vr);
  return drift;
}

bool CommitsDiffer(std::span<const CommittedToken> a, std::span<const CommittedToken> b) {
  if (a.size() != b.size()) return true;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].position != b[i].position || a[i].token != b[i].token) return true;
  }
  return false;
}

void MeasureShadow(const ShadowInputs& in, ShadowSample* sample) {
  const size_t rows = std::min(in.partial_logits.size(), in.full_logits.size());
  sample->predicted_rows = static_cast<int>(rows);
  double kl_sum = 0, kl_max = 0;
  for (size_t r = 0; r < rows; ++r) {
    const double kl = KlDivergence(in.full_logits[r], in.partial_logits[r]);
    kl_sum += kl;
    kl_max = std::max(kl_max, kl);
  }
  sample->kl_mean = rows ? kl_sum / rows : 0.0;
  sample->kl_max = kl_max;
  sample->decision_mismatch = CommitsDiffer(in.partial_commit, in.full_commit);
  sample->committed = static_cast<int>(in.partial_commit.size());
  double max_change = 0;
  bool token_mismatch = false;
  for (const CommittedToken& c : in.partial_commit) {
    const auto it =
        std::lower_bound(in.predict_positions.begin(), in.predict_positions.end(), c.position);
    if (it == in.predict_positions.end() || *it != c.position) continue;
    const size_t r = static_cast<size_t>(it - in.predict_positions.begin());
    if (r < in.full_rows.size() && in.full_rows[r].token != c.token) token_mismatch = true;
    if (r >= rows) continue;
    const double change = std::abs(SoftmaxProbability(in.partial_logits[r], c.token) -
                                   SoftmaxProbability(in.full_logits[r], c.token));
    max_change = std::max(max_change, change);
  }
  sample->max_prob_change = max_change;
  sample->token_mismatch = token_mismatch;
  if (in.kv != nullptr) {
    for (int region = 0; region < kShadowRegions; ++region) {
      sample->drift[region] = AggregateKvDrift(*in.kv, in.regions, region, -1);
      for (int g = 0; g < kShadowLayerGroups; ++g) {
        sample->drift_by_group[region][g] = AggregateKvDrift(*in.kv, in.regions, region, g);
      }
    }
  }
}

}  // namespace dllm
