// The shadow-sample measurements against independent references: KL from explicit
// probabilities, regions, drift aggregation by region and layer third, mismatch.
#include "engine/scheduler/shadow/shadow_measure.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <initializer_list>

namespace dllm {
namespace {

std::vector<double> Softmax(const std::vector<float>& logits) {
  std::vector<double> p;
  p.reserve(logits.size());
  double z = 0;
  for (float x : logits) z += std::exp(double(x));
  for (float x : logits) p.push_back(std::exp(double(x)) / z);
  return p;
}

TEST_CASE("KL(p || q) matches the definition; 0 for equal rows", "[shadow]") {
  const std::vector<float> a = {0.5f, -1.0f, 2.0f, 0.0f};
  const std::vector<float> b = {1.5f, 0.25f, -0.5f, 0.0f};
  const std::vector<double> p = Softmax(a), q = Softmax(b);
  double want = 0;
  for (size_t i = 0; i < p.size(); ++i) want += p[i] * std::log(p[i] / q[i]);
  CHECK(KlDivergence(a, b) == Approx(want).epsilon(1e-12));
  CHECK(KlDivergence(a, a) == 0.0);
  // Shifting all logits does not change the distribution.
  std::vector<float> shifted = a;
  for (float& x : shifted) x += 3.0f;
  CHECK(KlDivergence(a, shifted) == Approx(0.0).margin(1e-12));
  CHECK(SoftmaxProbability(a, 2) == Approx(p[2]).epsilon(1e-12));
  CHECK(SoftmaxProbability(a, 7) == 0.0);
}

TEST_CASE("Layer thirds cover every layer in order", "[shadow]") {
  CHECK(ShadowLayerThird(0, 1) == 0);
  CHECK(ShadowLayerThird(0, 3) == 0);
  CHECK(ShadowLayerThird(1, 3) == 1);
  CHECK(ShadowLayerThird(2, 3) == 2);
  CHECK(ShadowLayerThird(5, 6) == 2);
  CHECK(ShadowLayerThird(3, 6) == 1);
  CHECK(ShadowLayerThird(1, 6) == 0);
}

TEST_CASE("Regions: prompt, old decoded, masks outside, recomputed rows", "[shadow]") {
  // Prompt 0..2, answer 3..9; decided 3, 4, 6; query rows 2, 6, 7, 8.
  std::vector<uint8_t> decided = {1, 1, 1, 1, 1, 0, 1, 0, 0, 0};
  const std::vector<int32_t> query = {2, 6, 7, 8};
  const std::vector<int8_t> r = ShadowRegions(10, 3, decided, query);
  const std::vector<int8_t> want = {kShadowPrompt,      kShadowPrompt,     kShadowRecomputed,
                                    kShadowDecodedOld,  kShadowDecodedOld, kShadowMasksOutside,
                                    kShadowRecomputed,  kShadowRecomputed, kShadowRecomputed,
                                    kShadowMasksOutside};
  CHECK(r == want);
}

TEST_CASE("Drift aggregates squared norms by region and layer third", "[shadow]") {
  KvSquaredDiffs kv;
  kv.layers = 3;
  kv.positions = 2;
  // [layer][position]; position 0 is region 0, position 1 region 1.
  kv.k_diff = {1, 0, 4, 0, 0, 9};
  kv.k_ref = {4, 1, 4, 1, 1, 9};
  kv.v_diff = {0, 0, 0, 0, 0, 0};
  kv.v_ref = {4, 1, 4, 1, 1, 9};
  const std::vector<int8_t> regions = {0, 1};
  const auto all0 = AggregateKvDrift(kv, regions, 0, -1);
  CHECK(all0.positions == 1);
  CHECK(all0.layers == 3);
  CHECK(all0.k == Approx(std::sqrt(5.0 / 9.0)));
  CHECK(all0.v == 0.0);
  CHECK(all0.kv == Approx(std::sqrt(5.0 / 18.0)));
  const auto first0 = AggregateKvDrift(kv, regions, 0, 0);
  CHECK(first0.layers == 1);
  CHECK(first0.k == Approx(0.5));
  const auto last1 = AggregateKvDrift(kv, regions, 1, 2);
  CHECK(last1.k == Approx(1.0));
  const auto middle1 = AggregateKvDrift(kv, regions, 1, 1);
  CHECK(middle1.k == 0.0);
  const auto none = AggregateKvDrift(kv, regions, 3, -1);
  CHECK(none.positions == 0);
  CHECK(none.kv == 0.0);
}

TEST_CASE("MeasureShadow: mismatch, KL and committed-probability change", "[shadow]") {
  const std::vector<int32_t> predict = {5, 6};
  const std::vector<std::vector<float>> partial = {{2.0f, 0.0f, 0.0f}, {0.0f, 1.0f, 0.0f}};
  const std::vector<std::vector<float>> full = {{2.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 1.0f}};
  const std::vector<CommittedToken> commit_partial = {{6, 1, 0.9f}};
  std::vector<CommittedToken> commit_full = {{6, 2, 0.9f}};
  const std::vector<int8_t> regions(8, kShadowPrompt);
  KvSquaredDiffs kv;
  kv.layers = 1;
  kv.positions = 8;
  kv.k_diff.assign(8, 0.0);
  kv.k_ref.assign(8, 1.0);
  kv.v_diff.assign(8, 0.0);
  kv.v_ref.assign(8, 1.0);
  ShadowInputs in;
  in.predict_positions = predict;
  in.partial_logits = partial;
  in.full_logits = full;
  in.partial_commit = commit_partial;
  in.full_commit = commit_full;
  in.regions = regions;
  in.kv = &kv;
  ShadowSample s;
  MeasureShadow(in, &s);
  CHECK(s.predicted_rows == 2);
  CHECK(s.decision_mismatch);
  CHECK(s.committed == 1);
  const double kl1 = KlDivergence(full[1], partial[1]);
  CHECK(kl1 > 0.0);
  CHECK(s.kl_mean == Approx(kl1 / 2));
  CHECK(s.kl_max == Approx(kl1));
  const double p_partial = Softmax(partial[1])[1], p_full = Softmax(full[1])[1];
  CHECK(s.max_prob_change == Approx(std::abs(p_partial - p_full)));
  CHECK(s.drift[kShadowPrompt].positions == 8);
  CHECK(s.drift[kShadowPrompt].kv == 0.0);
  commit_full = commit_partial;
  in.full_commit = commit_full;
  MeasureShadow(in, &s);
  CHECK_FALSE(s.decision_mismatch);
}

// Rows of the full forward at positions 5, 6, 7 proposing `tokens`.
std::vector<RowStats> FullRows(std::initializer_list<int32_t> tokens) {
  std::vector<RowStats> rows;
  int32_t position = 5;
  for (const int32_t token : tokens) {
    RowStats row;
    row.position = position++;
    row.token = token;
    rows.push_back(row);
  }
  return rows;
}

TEST_CASE("MeasureShadow: a token mismatch is a different token, not a different timing",
          "[shadow]") {
  const std::vector<int32_t> predict = {5, 6, 7};
  const std::vector<std::vector<float>> logits(3, std::vector<float>{1.0f, 0.0f, 0.0f});
  const std::vector<int8_t> regions(8, kShadowPrompt);
  ShadowInputs in;
  in.predict_positions = predict;
  in.partial_logits = logits;
  in.full_logits = logits;
  in.regions = regions;
  ShadowSample s;

  // The partial step commits positions 5 and 6; the full step would commit only 5 (position
  // 6 under its threshold) but proposes the same token at 6: the token lands a step later.
  const std::vector<CommittedToken> partial = {{5, 4, 0.1f}, {6, 9, 0.2f}};
  const std::vector<CommittedToken> full_later = {{5, 4, 0.1f}};
  const std::vector<RowStats> same_tokens = FullRows({4, 9, 3});
  in.partial_commit = partial;
  in.full_commit = full_later;
  in.full_rows = same_tokens;
  MeasureShadow(in, &s);
  CHECK(s.decision_mismatch);
  CHECK_FALSE(s.token_mismatch);

  // The full rows propose another token at position 6: the text would differ.
  const std::vector<RowStats> other_at_6 = FullRows({4, 8, 3});
  in.full_rows = other_at_6;
  MeasureShadow(in, &s);
  CHECK(s.decision_mismatch);
  CHECK(s.token_mismatch);

  // Only committed positions count: position 7 differs but the partial step leaves it masked.
  const std::vector<RowStats> other_at_7 = FullRows({4, 9, 1});
  in.full_rows = other_at_7;
  in.full_commit = partial;
  MeasureShadow(in, &s);
  CHECK_FALSE(s.decision_mismatch);
  CHECK_FALSE(s.token_mismatch);

  // Without the full rows' tokens there is nothing to compare against.
  in.full_rows = {};
  in.full_commit = full_later;
  MeasureShadow(in, &s);
  CHECK_FALSE(s.token_mismatch);
}

}  // namespace
}  // namespace dllm
