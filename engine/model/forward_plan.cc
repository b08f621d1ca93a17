#include "engine/model/forward_plan.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <string>
#include <unordered_set>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/kv/kv_pool.h"

namespace dllm {
namespace {

absl::Status CheckPositions(const std::vector<int32_t>& positions, int n, size_t sequence,
                            const char* what) {
  for (size_t i = 0; i < positions.size(); ++i) {
    if (positions[i] < 0 || positions[i] >= n) {
      return absl::InvalidArgumentError(absl::StrCat("sequence ", sequence, ": ", what, " ",
                                                     positions[i], " outside [0, ", n, ")"));
    }
    if (i > 0 && positions[i] <= positions[i - 1]) {
      return absl::InvalidArgumentError(
          absl::StrCat("sequence ", sequence, ": ", what, " must be ascending and unique (",
                       positions[i - 1], " then ", positions[i], ")"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ForwardPlan> PlanForward(const StepBatch& batch, const ModelConfig& config,
                                        bool shift_logits) {
  ForwardPlan plan;
  plan.sequences.resize(batch.sequences.size());
  std::unordered_set<const KvSlab*> slabs;
  for (size_t i = 0; i < batch.sequences.size(); ++i) {
    const SequenceStep& s = batch.sequences[i];
    SequencePlan& p = plan.sequences[i];
    if (s.kv == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("sequence ", i, ": no KV slab"));
    }
    if (!slabs.insert(s.kv).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("sequence ", i, ": KV slab shared with an earlier sequence"));
    }
    const int64_t n64 = static_cast<int64_t>(s.tokens.size());
    if (n64 == 0) return absl::InvalidArgumentError(absl::StrCat("sequence ", i, ": no tokens"));
    if (n64 > s.kv->capacity_positions()) {
      return absl::InvalidArgumentError(absl::StrCat("sequence ", i, ": ", n64,
                                                     " tokens but the KV slab holds only ",
                                                     s.kv->capacity_positions(), " positions"));
    }
    if (config.max_positions > 0 && n64 > config.max_positions) {
      return absl::InvalidArgumentError(absl::StrCat("sequence ", i, ": ", n64,
                                                     " tokens exceed the model's ",
                                                     config.max_positions, " positions"));
    }
    const int n = static_cast<int>(n64);
    for (int t = 0; t < n; ++t) {
      if (s.tokens[t] < 0 || s.tokens[t] >= config.vocab_size) {
        return absl::InvalidArgumentError(
            absl::StrCat("sequence ", i, ": token id ", s.tokens[t], " at position ", t,
                         " outside the vocabulary [0, ", config.vocab_size, ")"));
      }
    }
    if (auto st = CheckPositions(s.query_positions, n, i, "query position"); !st.ok()) return st;
    if (auto st = CheckPositions(s.predict_positions, n, i, "predict position"); !st.ok()) {
      return st;
    }
    // The request's sampling parameters passed ValidateParams (engine/core/params.h) when it
    // was submitted; a violation here is a scheduler bug, not bad input.
    assert(std::isfinite(s.sampling.temperature) && s.sampling.temperature >= 0.0f);
    assert(s.sampling.top_k >= 0);
    assert(s.sampling.top_p > 0.0f && s.sampling.top_p <= 1.0f);

    // Rows = query positions ∪ the rows that predict the wanted positions.
    std::vector<int32_t> hidden;
    hidden.reserve(s.predict_positions.size());
    for (int32_t pos : s.predict_positions) {
      hidden.push_back(shift_logits ? std::max(pos - 1, 0) : pos);
    }
    // `hidden` is ascending (p-1 keeps the order; p = 0 and p = 1 may both map to row 0).
    std::vector<int32_t> unique_hidden = hidden;
    unique_hidden.erase(std::unique(unique_hidden.begin(), unique_hidden.end()),
                        unique_hidden.end());
    p.positions.reserve(s.query_positions.size() + unique_hidden.size());
    std::set_union(s.query_positions.begin(), s.query_positions.end(), unique_hidden.begin(),
                   unique_hidden.end(), std::back_inserter(p.positions));
    p.row_begin = plan.total_rows;
    p.predict_rows.reserve(hidden.size());
    for (int32_t row : hidden) {
      const auto it = std::lower_bound(p.positions.begin(), p.positions.end(), row);
      p.predict_rows.push_back(p.row_begin + static_cast<int>(it - p.positions.begin()));
    }
    plan.total_rows += static_cast<int>(p.positions.size());
    plan.total_predictions += static_cast<int>(p.predict_rows.size());
  }
  return plan;
}

}  // namespace dllm
