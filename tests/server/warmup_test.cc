// CheckWarmupOutput: the warm-up's sanity check on what the model committed (issue 34, item 9).
// The end-to-end cases (a zeroed checkpoint through the real engine, every shipped model
// accepted) are in tests/reliability/model_loading_test.cc.
#include "server/warmup.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

namespace dllm {
namespace {

std::string Message(const absl::Status& s) { return std::string(s.message()); }

TEST_CASE("warm-up check: all-uniform distributions are degenerate", "[warmup]") {
  const int vocab = 126464;
  const float uniform = static_cast<float>(std::log(static_cast<double>(vocab)));
  // Float rounding puts a computed uniform entropy a hair either side of ln(vocab).
  const std::vector<float> entropies = {uniform, std::nextafter(uniform, 0.0f),
                                        std::nextafter(uniform, 100.0f), uniform};
  const absl::Status status = CheckWarmupOutput(vocab, entropies);
  INFO(Message(status));
  REQUIRE(absl::IsDataLoss(status));
  CHECK_THAT(Message(status), Catch::StartsWith("warm-up: the model's output is degenerate: "
                                                "every predicted distribution is uniform"));
  CHECK_THAT(Message(status), Catch::Contains("126464-token vocabulary"));
  CHECK_THAT(Message(status), Catch::Contains("all zero"));
}

TEST_CASE("warm-up check: one informative distribution is enough", "[warmup]") {
  const int vocab = 320;
  const float uniform = static_cast<float>(std::log(320.0));
  CHECK(CheckWarmupOutput(vocab, std::vector<float>{uniform, uniform, uniform - 0.01f}).ok());
  CHECK(CheckWarmupOutput(vocab, std::vector<float>{0.0f}).ok());  // certain
  CHECK(CheckWarmupOutput(vocab, std::vector<float>{2.5f, 0.3f, 4.0f}).ok());
  // Just inside the uniform tolerance is still degenerate.
  const float near = static_cast<float>(std::log(320.0) - kWarmupUniformGapNats / 2);
  CHECK(absl::IsDataLoss(CheckWarmupOutput(vocab, std::vector<float>{near, uniform})));
}

TEST_CASE("warm-up check: non-finite entropies and empty output are errors", "[warmup]") {
  for (float bad :
       {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
    const absl::Status status = CheckWarmupOutput(320, std::vector<float>{1.0f, bad});
    REQUIRE(absl::IsDataLoss(status));
    CHECK_THAT(Message(status), Catch::Contains("non-finite"));
  }
  const absl::Status none = CheckWarmupOutput(320, std::vector<float>{});
  REQUIRE(absl::IsInternal(none));
  CHECK_THAT(Message(none), Catch::Contains("committed no tokens"));
}

}  // namespace
}  // namespace dllm
