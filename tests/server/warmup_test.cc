// CheckWarmupOutput: the warm-up's sanity check on what the model committed.
// The end-to-end cases run RunWarmup on the real engine: a zeroed checkpoint is refused, every
// shipped model and reference fixture is accepted.
#include "server/warmup.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "tests/support/model_copy.h"

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

using testing::Json;
using testing::Load;
using testing::ModelCopy;
using testing::ReadFile;
using testing::WriteFile;
namespace fs = std::filesystem;

// Overwrites the data section of a safetensors file with zeros, keeping its header: what a
// checkpoint rewritten in place (e.g. a copy still being written, or a preallocated file)
// looks like. Shapes and sizes stay valid, so only the model's output can tell.
void ZeroWeights(const fs::path& file) {
  std::string bytes = ReadFile(file);
  uint64_t header_len = 0;
  std::memcpy(&header_len, bytes.data(), 8);
  std::fill(bytes.begin() + 8 + static_cast<std::ptrdiff_t>(header_len), bytes.end(), '\0');
  WriteFile(file, bytes);
}

const char* const kShippedModels[] = {"llada-tiny", "dream-tiny", "llada-long",
                                      "dream-long", "llada-cot",  "dream-cot"};

TEST_CASE("warm-up: refuses a model whose weights are all zero", "[reliability]") {
  // A checkpoint overwritten with zeros during load went unnoticed, warm-up
  // passed and the server answered token 0 (NUL bytes) to every request.
  for (const char* name : kShippedModels) {
    DYNAMIC_SECTION(name) {
      ModelCopy model(name);
      ZeroWeights(model.dir() / "model.safetensors");
      auto engine = Load(model.dir());
      REQUIRE(engine.ok());  // shapes and sizes are intact: loading cannot tell
      const absl::Status warmup = RunWarmup(**engine, absl::Seconds(120));
      INFO(Message(warmup));
      CHECK(absl::IsDataLoss(warmup));
      CHECK_THAT(Message(warmup),
                 Catch::Contains("the model's output is degenerate: every predicted "
                                 "distribution is uniform"));
      CHECK_THAT(Message(warmup), Catch::Contains("all zero"));
    }
  }
}

TEST_CASE("warm-up: accepts every shipped model and reference fixture", "[reliability]") {
  // The degenerate-output check must not refuse a real model: the trained models in models/
  // and the random-weight fixtures the e2e tests serve.
  std::vector<fs::path> dirs;
  for (const char* name : kShippedModels)
    dirs.push_back(fs::path(DLLM_SOURCE_DIR) / "models" / name);
  for (const char* name : {"llada_mha", "llada_gqa_f32", "dream_gqa", "dream_f16"}) {
    dirs.push_back(fs::path(DLLM_TEST_DATA_DIR) / "reference" / name);
  }
  for (const fs::path& dir : dirs) {
    DYNAMIC_SECTION(dir.filename().string()) {
      auto engine = Load(dir);
      REQUIRE(engine.ok());
      const absl::Status warmup = RunWarmup(**engine, absl::Seconds(120));
      INFO(Message(warmup));
      CHECK(warmup.ok());
    }
  }
}

}  // namespace
}  // namespace dllm
