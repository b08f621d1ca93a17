#include "engine/decoding/attention_rollout.h"

#include <catch2/catch.hpp>
#include <random>
#include <vector>

namespace dllm {
namespace {

// Random row-stochastic maps for `query_rows` over `positions` keys.
AttentionMaps RandomMaps(int layers, const std::vector<int32_t>& query_rows, int positions,
                         uint32_t seed) {
  AttentionMaps maps;
  maps.Reset(layers, static_cast<int>(query_rows.size()), positions);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  for (int l = 0; l < layers; ++l) {
    std::span<float> layer = maps.Layer(l);
    for (size_t r = 0; r < query_rows.size(); ++r) {
      float sum = 0;
      for (int j = 0; j < positions; ++j) sum += (layer[r * positions + j] = u(rng));
      for (int j = 0; j < positions; ++j) layer[r * positions + j] /= sum;
    }
  }
  return maps;
}

// d2Cache's own formulation: R = I; per layer E = I with the query rows replaced by A,
// M = (E + I) row-normalized, R = M R; importance = column sums of R.
std::vector<double> ExplicitRollout(const AttentionMaps& maps,
                                    const std::vector<int32_t>& query_rows) {
  const int T = maps.positions;
  std::vector<double> R(T * T, 0.0);
  for (int i = 0; i < T; ++i) R[i * T + i] = 1.0;
  for (int l = 0; l < maps.layers; ++l) {
    std::vector<double> M(T * T, 0.0);
    for (int i = 0; i < T; ++i) M[i * T + i] = 1.0;  // E's identity rows
    for (size_t r = 0; r < query_rows.size(); ++r) {
      const int i = query_rows[r];
      for (int j = 0; j < T; ++j) M[i * T + j] = maps.Row(l, static_cast<int>(r))[j];
    }
    for (int i = 0; i < T; ++i) M[i * T + i] += 1.0;  // + I
    for (int i = 0; i < T; ++i) {
      double sum = 0;
      for (int j = 0; j < T; ++j) sum += M[i * T + j];
      for (int j = 0; j < T; ++j) M[i * T + j] /= sum;
    }
    std::vector<double> next(T * T, 0.0);
    for (int i = 0; i < T; ++i)
      for (int k = 0; k < T; ++k)
        for (int j = 0; j < T; ++j) next[i * T + j] += M[i * T + k] * R[k * T + j];
    R.swap(next);
  }
  std::vector<double> cols(T, 0.0);
  for (int i = 0; i < T; ++i)
    for (int j = 0; j < T; ++j) cols[j] += R[i * T + j];
  return cols;
}

TEST_CASE("Rollout importance equals d2Cache's explicit matrix product", "[decoding][d2cache]") {
  const int T = 9;
  for (const std::vector<int32_t>& rows :
       {std::vector<int32_t>{0, 1, 2, 3, 4, 5, 6, 7, 8}, std::vector<int32_t>{2, 3, 7},
        std::vector<int32_t>{8}}) {
    for (int layers : {1, 3}) {
      const AttentionMaps maps = RandomMaps(layers, rows, T, 17 + layers + rows.size());
      const std::vector<double> got = RolloutImportance(maps, rows);
      const std::vector<double> want = ExplicitRollout(maps, rows);
      REQUIRE(got.size() == want.size());
      double total = 0;
      for (int j = 0; j < T; ++j) {
        INFO("layers " << layers << " rows " << rows.size() << " position " << j);
        CHECK(got[j] == Approx(want[j]).epsilon(1e-9));
        total += got[j];
      }
      CHECK(total == Approx(T));  // R is row-stochastic
    }
  }
}

TEST_CASE("Rollout by hand: one query row attending elsewhere", "[decoding][d2cache]") {
  AttentionMaps maps;
  maps.Reset(1, 1, 2);
  maps.Layer(0)[0] = 0.0f;  // row 0 attends to position 1 only
  maps.Layer(0)[1] = 1.0f;
  // M = [[1/2, 1/2], [0, 1]]: column sums 1/2 and 3/2.
  const std::vector<double> got = RolloutImportance(maps, std::vector<int32_t>{0});
  CHECK(got == std::vector<double>{0.5, 1.5});
  AttentionMaps none;  // no maps: R = I
  CHECK(RolloutImportance(none, {}) == std::vector<double>{});
}

TEST_CASE("Nucleus selection: exclusive running sum, top one always", "[decoding][d2cache]") {
  const std::vector<double> imp = {0.1, 0.5, 0.2, 0.2};
  const std::vector<uint8_t> none(4, 0);
  CHECK(NucleusSelect(imp, none, 0.5) == std::vector<int32_t>{1});
  CHECK(NucleusSelect(imp, none, 0.4) == std::vector<int32_t>{1});  // the top one anyway
  // 0.5 + 0.2 = 0.7 <= 0.75; + 0.2 = 0.9 crosses: ties rank the lower position first.
  CHECK(NucleusSelect(imp, none, 0.75) == std::vector<int32_t>{1, 2});
  CHECK(NucleusSelect(imp, none, 1.0) == std::vector<int32_t>{0, 1, 2, 3});
  // Excluding position 1 renormalizes the rest: 0.2, 0.4, 0.4.
  const std::vector<uint8_t> ex1 = {0, 1, 0, 0};
  CHECK(NucleusSelect(imp, ex1, 0.5) == std::vector<int32_t>{2});
  CHECK(NucleusSelect(imp, ex1, 0.8) == std::vector<int32_t>{2, 3});
  CHECK(NucleusSelect(imp, std::vector<uint8_t>(4, 1), 0.5).empty());
  // All zero: the running sum never passes top_p, so d2Cache's rule takes everything.
  CHECK(NucleusSelect(std::vector<double>(3, 0.0), std::vector<uint8_t>(3, 0), 0.1) ==
        std::vector<int32_t>{0, 1, 2});
}

}  // namespace
}  // namespace dllm
