// LLaDA quotas and Dream per-step counts against expectations computed with PyTorch by
// gen_schedule_expectations.py (committed next to this file with its output).
#include "engine/decoding/schedules.h"

#include <catch2/catch.hpp>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace dllm {
namespace {

nlohmann::json LoadExpectations() {
  const std::string path =
      std::string(DLLM_SOURCE_DIR) + "/tests/engine/decoding/data/schedule_expectations.json";
  std::ifstream in(path);
  REQUIRE(in.good());
  std::stringstream buffer;
  buffer << in.rdbuf();
  return nlohmann::json::parse(buffer.str());
}

TEST_CASE("BlockQuota matches LLaDA get_num_transfer_tokens", "[decoding][schedules]") {
  const nlohmann::json expectations = LoadExpectations();
  REQUIRE(expectations["llada_quota"].size() >= 5);
  for (const auto& c : expectations["llada_quota"]) {
    const std::vector<int> want = c["quota"].get<std::vector<int>>();
    INFO("masks=" << c["masks"] << " steps_per_block=" << c["steps_per_block"]);
    CHECK(BlockQuota(c["masks"].get<int>(), c["steps_per_block"].get<int>()) == want);
  }
}

std::vector<int> DreamCounts(int gen_length, int steps, float eps) {
  const std::vector<float> ts = DreamTimesteps(steps, eps);
  std::vector<int> counts;
  int masks = gen_length;
  for (int i = 0; i < steps; ++i) {
    const int k = DreamTransferCount(ts, i, masks);
    counts.push_back(k);
    masks -= k;
  }
  return counts;
}

TEST_CASE("Dream count schedule matches PyTorch float32 arithmetic", "[decoding][schedules]") {
  const nlohmann::json expectations = LoadExpectations();
  int cases = 0, cpu_cases = 0;
  for (const auto& c : expectations["dream"]) {
    const int g = c["gen_length"], steps = c["steps"];
    const float eps = c["eps"].get<float>();
    INFO("gen_length=" << g << " steps=" << steps << " eps=" << eps);
    const std::vector<int> got = DreamCounts(g, steps, eps);
    CHECK(got == c["counts_spec"].get<std::vector<int>>());
    // Where this CPU's torch.linspace agrees with the formula (all steps == gen_length
    // cases below ~900, which the trained models use), the engine matches it too.
    if (c["cpu_agrees"].get<bool>()) {
      CHECK(got == c["counts_torch_cpu"].get<std::vector<int>>());
      ++cpu_cases;
    }
    ++cases;
  }
  CHECK(cases > 100);
  CHECK(cpu_cases > 100);
}

TEST_CASE("Dream counts commit everything and start at zero for steps == G",
          "[decoding][schedules]") {
  const std::vector<int> counts = DreamCounts(512, 512, 1e-3f);
  int total = 0;
  for (int k : counts) total += k;
  CHECK(total == 512);
  CHECK(counts.front() == 0);  // int(512 * 0.00195...) = 0, docs/models.md §3.6
}

TEST_CASE("LinspaceF32 endpoints", "[decoding][schedules]") {
  const std::vector<float> ts = LinspaceF32(1.0f, 1e-3f, 9);
  REQUIRE(ts.size() == 9);
  CHECK(ts.front() == 1.0f);
  CHECK(ts.back() == 1e-3f);
  CHECK(LinspaceF32(1.0f, 0.5f, 1) == std::vector<float>{1.0f});
}

}  // namespace
}  // namespace dllm
