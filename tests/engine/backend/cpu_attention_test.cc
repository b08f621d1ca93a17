#include "engine/backend/cpu/cpu_attention.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "engine/backend/cpu/cpu_gemm.h"  // CpuGemmSupportedTargets
#include "hwy/targets.h"
#include "tests/engine/backend/simd_test_util.h"

namespace dllm {
namespace {

using test::RandomVector;
using test::TargetGuard;

struct Case {
  CpuAttentionGeometry g;
  int rows;
  int positions;
};

// GQA groups of 1, 4 and 3; head dims 64, 32 and 20 (a tail shorter than a vector); more rows
// than kAttentionRowBlock; position counts that are not a multiple of any vector width.
const Case kCases[] = {{{4, 4, 64, 0.125f}, 9, 37},
                       {{8, 2, 32, 0.17677670f}, 200, 300},
                       {{6, 2, 20, 0.22360680f}, 11, 5}};

struct QKV {
  std::vector<float> q, k, v;
};

// Seeded q (spread q_scale), k and v for a case; advances *seed.
QKV Inputs(const Case& c, uint32_t* seed, float q_scale) {
  const int64_t width = int64_t{c.g.num_heads} * c.g.head_dim;
  const int64_t kv_width = int64_t{c.g.num_kv_heads} * c.g.head_dim;
  QKV in;
  in.q = RandomVector(c.rows * width, (*seed)++, q_scale);
  in.k = RandomVector(c.positions * kv_width, (*seed)++, 1.0f);
  in.v = RandomVector(c.positions * kv_width, (*seed)++, 1.0f);
  return in;
}

// Runs every head of rows [first, first + count) of the case's q.
std::vector<float> Run(const Case& c, const std::vector<float>& q, const std::vector<float>& k,
                       const std::vector<float>& v, int first, int count) {
  const int64_t width = int64_t{c.g.num_heads} * c.g.head_dim;
  std::vector<float> out(count * width, 0.0f);
  CpuAttentionScratch scratch;
  for (int h = 0; h < c.g.num_heads; ++h) {
    CpuAttentionHead(q.data() + first * width, width, count, h, k.data(), v.data(), c.positions,
                     c.g, out.data(), &scratch);
  }
  return out;
}

TEST_CASE("cpu_attention: matches a double-precision softmax attention") {
  uint32_t seed = 1;
  for (const Case& c : kCases) {
    const int64_t width = int64_t{c.g.num_heads} * c.g.head_dim;
    const int64_t kv_width = int64_t{c.g.num_kv_heads} * c.g.head_dim;
    const auto [q, k, v] = Inputs(c, &seed, 1.0f);
    const std::vector<float> got = Run(c, q, k, v, 0, c.rows);
    const int group = c.g.num_heads / c.g.num_kv_heads;
    double worst = 0;
    for (int r = 0; r < c.rows; ++r) {
      for (int h = 0; h < c.g.num_heads; ++h) {
        const int kvh = h / group;
        std::vector<double> s(c.positions);
        double m = -INFINITY, sum = 0;
        for (int j = 0; j < c.positions; ++j) {
          double dot = 0;
          for (int i = 0; i < c.g.head_dim; ++i) {
            dot += double{q[r * width + h * c.g.head_dim + i]} *
                   k[j * kv_width + kvh * c.g.head_dim + i];
          }
          s[j] = dot * c.g.scale;
          m = std::max(m, s[j]);
        }
        for (int j = 0; j < c.positions; ++j) sum += s[j] = std::exp(s[j] - m);
        for (int i = 0; i < c.g.head_dim; ++i) {
          double o = 0;
          for (int j = 0; j < c.positions; ++j)
            o += s[j] * v[j * kv_width + kvh * c.g.head_dim + i];
          worst = std::max(worst, std::abs(o / sum - got[r * width + h * c.g.head_dim + i]));
        }
      }
    }
    INFO("heads=" << c.g.num_heads << " d=" << c.g.head_dim << " positions=" << c.positions);
    CHECK(worst < 2e-5);
  }
}

// A row's output must not depend on which other rows share the call, on the row block it falls
// in, or on the SIMD target: partial steps (a few rows) must reproduce full steps (all rows).
TEST_CASE("cpu_attention: rows are invariant to the rows beside them and to the SIMD target") {
  TargetGuard guard;
  std::vector<float> first_target;
  for (int64_t target : CpuGemmSupportedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    INFO("target " << hwy::TargetName(target));
    uint32_t seed = 50;
    std::vector<float> all_cases;
    for (const Case& c : kCases) {
      const int64_t width = int64_t{c.g.num_heads} * c.g.head_dim;
      const auto [q, k, v] = Inputs(c, &seed, 2.0f);
      const std::vector<float> all = Run(c, q, k, v, 0, c.rows);
      for (int first : {0, 1, c.rows / 2, c.rows - 1}) {
        for (int count : {1, 2, 7}) {
          if (first + count > c.rows) continue;
          INFO("rows " << first << ".." << first + count);
          const std::vector<float> part = Run(c, q, k, v, first, count);
          CHECK(std::memcmp(part.data(), all.data() + first * width,
                            sizeof(float) * count * width) == 0);
        }
      }
      all_cases.insert(all_cases.end(), all.begin(), all.end());
    }
    if (first_target.empty()) {
      first_target = all_cases;
    } else {
      REQUIRE(all_cases.size() == first_target.size());
      CHECK(std::memcmp(all_cases.data(), first_target.data(), sizeof(float) * all_cases.size()) ==
            0);
    }
  }
}

TEST_CASE("cpu_attention: no cached positions gives zeros") {
  const CpuAttentionGeometry g{2, 1, 16, 0.25f};
  std::vector<float> q(3 * 32, 1.0f), out(3 * 32, 5.0f);
  CpuAttentionScratch scratch;
  CpuAttentionHead(q.data(), 32, 3, 1, nullptr, nullptr, 0, g, out.data(), &scratch);
  for (int r = 0; r < 3; ++r) {
    for (int i = 0; i < 16; ++i) CHECK(out[r * 32 + i] == 5.0f);   // head 0 untouched
    for (int i = 16; i < 32; ++i) CHECK(out[r * 32 + i] == 0.0f);  // head 1 zeroed
  }
}

}  // namespace
}  // namespace dllm
