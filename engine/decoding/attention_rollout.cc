#include "engine/decoding/attention_rollout.h"

#include <algorithm>
#include <cassert>
#include <numeric>

namespace dllm {

std::vector<double> RolloutImportance(const AttentionMaps& maps,
                                      std::span<const int32_t> query_rows) {
  const int T = maps.positions;
  std::vector<double> v(static_cast<size_t>(T), 1.0);
  if (maps.layers == 0 || maps.rows == 0) return v;
  assert(static_cast<int>(query_rows.size()) == maps.rows);
  std::vector<double> next(v.size());
  // v M_l: a query row i, M_l[i] = (A_l[i] + e_i) / (sum(A_l[i]) + 1) (d2Cache divides by the
  // actual row sum, 2 up to rounding), moves v[i] onto A_l[i] and its own column; any other
  // row passes v[i] through unchanged.
  for (int l = maps.layers - 1; l >= 0; --l) {
    next = v;
    for (int r = 0; r < maps.rows; ++r) next[query_rows[r]] -= v[query_rows[r]];
    for (int r = 0; r < maps.rows; ++r) {
      const std::span<const float> a = maps.Row(l, r);
      double row_sum = 1.0;
      for (int j = 0; j < T; ++j) row_sum += a[j];
      const double share = v[query_rows[r]] / row_sum;
      next[query_rows[r]] += share;
      for (int j = 0; j < T; ++j) next[j] += share * a[j];
    }
    v.swap(next);
  }
  return v;
}

std::vector<int32_t> NucleusSelect(std::span<const double> importance,
                                   std::span<const uint8_t> excluded, double top_p) {
  assert(importance.size() == excluded.size());
  const int T = static_cast<int>(importance.size());
  std::vector<int32_t> order;
  order.reserve(importance.size());
  double total = 0;
  for (int j = 0; j < T; ++j) {
    if (excluded[j]) continue;
    order.push_back(j);
    total += std::max(importance[j], 0.0);
  }
  if (order.empty() || top_p >= 1.0) return order;
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t b) { return importance[a] > importance[b]; });
  // d2Cache normalizes by (sum + 1e-9) so an all-zero vector takes only the top one.
  const double norm = 1.0 / (total + 1e-9);
  std::vector<int32_t> out;
  double cumulative = 0;
  for (size_t i = 0; i < order.size(); ++i) {
    cumulative += std::max(importance[order[i]], 0.0) * norm;
    if (i > 0 && cumulative > top_p) break;
    out.push_back(order[i]);
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace dllm
