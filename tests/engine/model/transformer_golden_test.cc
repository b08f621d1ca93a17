// The forward pass against independent PyTorch goldens (tools/reference/modeling.py, float64
// from the stored weights): tests/data/reference/<fixture>/golden.json lists input ids and a
// raw little-endian float32 file of UNSHIFTED logits [rows, vocab] per case.
#include <catch2/catch.hpp>
#include <cmath>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/backend/backend_factory.h"
#include "engine/kv/kv_pool.h"
#include "engine/model/checkpoint.h"
#include "engine/model/forward_inspection.h"
#include "engine/model/model_config.h"
#include "engine/model/model_weights.h"
#include "engine/model/transformer.h"

namespace dllm {
namespace {

std::string FixtureDir(const std::string& name) {
  return std::string(DLLM_TEST_DATA_DIR) + "/reference/" + name;
}

std::vector<float> ReadF32(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE(in.good());
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  REQUIRE(bytes.size() % 4 == 0);
  std::vector<float> out(bytes.size() / 4);
  std::memcpy(out.data(), bytes.data(), bytes.size());
  return out;
}

void CheckFixture(const std::string& name) {
  const std::string dir = FixtureDir(name);
  auto config = LoadModelConfig(dir);
  REQUIRE(config.ok());
  auto checkpoint = Checkpoint::Open(dir);
  REQUIRE(checkpoint.ok());
  auto weights = MapModelWeights(**checkpoint, *config);
  REQUIRE(weights.ok());
  auto backend = CreateBackend("cpu", 2);
  REQUIRE(backend.ok());
  auto transformer = Transformer::Create(*config, *weights, backend->get());
  REQUIRE(transformer.ok());
  KvPool pool(backend->get(), config->kv_layout(), int64_t{1} << 26);

  std::ifstream golden_file(dir + "/golden.json");
  REQUIRE(golden_file.good());
  const nlohmann::json golden = nlohmann::json::parse(golden_file);
  REQUIRE(golden["cases"].size() > 0);
  for (const auto& c : golden["cases"]) {
    const std::vector<int32_t> ids = c["input_ids"].get<std::vector<int32_t>>();
    const int rows = c["rows"].get<int>();
    const int vocab = c["vocab"].get<int>();
    REQUIRE(vocab == config->vocab_size);
    REQUIRE(rows == static_cast<int>(ids.size()));
    const std::vector<float> want = ReadF32(dir + "/" + c["logits_file"].get<std::string>());
    REQUIRE(want.size() == static_cast<size_t>(rows) * vocab);

    auto slab = pool.Allocate(rows);
    REQUIRE(slab.ok());
    std::vector<int32_t> all(rows);
    for (int i = 0; i < rows; ++i) all[i] = i;
    StepBatch batch;
    SequenceStep s;
    s.kv = slab->get();
    s.tokens = ids;
    s.query_positions = all;
    s.predict_positions = all;
    batch.sequences.push_back(s);

    // Raw rows: every row against the golden row.
    StepResult result;
    std::vector<std::vector<std::vector<float>>> logits;
    REQUIRE(ForwardWithLogits(**transformer, batch, DebugLogitsRows::kHiddenRows, &result, &logits)
                .ok());
    for (int r = 0; r < rows; ++r) {
      const float* g = &want[static_cast<size_t>(r) * vocab];
      double max_diff = 0, max_ref = 0;
      int ref_argmax = 0;
      for (int v = 0; v < vocab; ++v) {
        max_diff = std::max(max_diff, std::abs(static_cast<double>(logits[0][r][v]) - g[v]));
        max_ref = std::max(max_ref, std::abs(static_cast<double>(g[v])));
        if (g[v] > g[ref_argmax]) ref_argmax = v;
      }
      INFO(name << " case with " << rows << " rows, row " << r);
      CHECK(max_diff <= 1e-4 * max_ref);
      // The argmax must agree unless the golden top two are within the tolerance.
      float second = -INFINITY;
      for (int v = 0; v < vocab; ++v) {
        if (v != ref_argmax) second = std::max(second, g[v]);
      }
      if (g[ref_argmax] - second > 1e-3 * max_ref) CHECK(result[0][r].argmax_token == ref_argmax);
    }

    // With the model's own shift (Dream): position p's stats come from golden row p-1.
    StepResult shifted;
    std::vector<std::vector<std::vector<float>>> shifted_logits;
    REQUIRE(ForwardWithLogits(**transformer, batch, DebugLogitsRows::kPredicted, &shifted,
                              &shifted_logits)
                .ok());
    for (int p = 0; p < rows; ++p) {
      const int row = config->shift_logits ? std::max(p - 1, 0) : p;
      const float* g = &want[static_cast<size_t>(row) * vocab];
      double max_diff = 0, max_ref = 0;
      for (int v = 0; v < vocab; ++v) {
        max_diff =
            std::max(max_diff, std::abs(static_cast<double>(shifted_logits[0][p][v]) - g[v]));
        max_ref = std::max(max_ref, std::abs(static_cast<double>(g[v])));
      }
      INFO(name << " shifted position " << p);
      CHECK(max_diff <= 1e-4 * max_ref);
    }
  }
}

TEST_CASE("transformer golden: llada_mha (MHA, bf16 weights)") { CheckFixture("llada_mha"); }
TEST_CASE("transformer golden: llada_gqa_f32 (GQA, fp32 weights, sharded)") {
  CheckFixture("llada_gqa_f32");
}
TEST_CASE("transformer golden: dream_gqa (GQA, qkv bias, theta 1e6)") { CheckFixture("dream_gqa"); }
TEST_CASE("transformer golden: dream_f16 (fp16 weights, theta 1e4)") { CheckFixture("dream_f16"); }

}  // namespace
}  // namespace dllm
