#include "engine/model/model_weights.h"

#include <catch2/catch.hpp>
#include <filesystem>

#include "tests/engine/model/safetensors_fixture.h"

namespace dllm {
namespace {

namespace fs = std::filesystem;
using testing::MakeTempDir;
using testing::TinyModelSpec;
using testing::WriteTinyModel;

std::string Message(const absl::Status& s) { return std::string(s.message()); }

struct Loaded {
  std::unique_ptr<Checkpoint> checkpoint;
  ModelConfig config;
};

Loaded Load(const fs::path& dir) {
  auto config = LoadModelConfig(dir.string());
  REQUIRE(config.ok());
  auto checkpoint = Checkpoint::Open(dir.string());
  if (!checkpoint.ok()) FAIL(Message(checkpoint.status()));
  return {*std::move(checkpoint), *config};
}

TEST_CASE("MapModelWeights resolves a tiny LLaDA and Dream model", "[model_weights]") {
  for (bool dream : {false, true}) {
    for (int shards : {1, 3}) {
      DYNAMIC_SECTION((dream ? "dream" : "llada") << " shards=" << shards) {
        const fs::path dir = MakeTempDir("weights_ok");
        TinyModelSpec spec;
        spec.dream = dream;
        spec.shards = shards;
        const auto written = WriteTinyModel(dir, spec);
        Loaded m = Load(dir);
        auto w = MapModelWeights(*m.checkpoint, m.config);
        if (!w.ok()) FAIL(Message(w.status()));
        REQUIRE(w->layers.size() == 2);
        CHECK(w->embed.shape == std::vector<int64_t>{spec.vocab, spec.hidden});
        CHECK(w->lm_head.shape == std::vector<int64_t>{spec.vocab, spec.hidden});
        const int64_t kv = dream ? spec.kv_heads * (spec.hidden / spec.heads) : spec.hidden;
        for (const LayerWeights& l : w->layers) {
          CHECK(l.q.shape == std::vector<int64_t>{spec.hidden, spec.hidden});
          CHECK(l.k.shape == std::vector<int64_t>{kv, spec.hidden});
          CHECK(l.v.shape == std::vector<int64_t>{kv, spec.hidden});
          CHECK(l.o.shape == std::vector<int64_t>{spec.hidden, spec.hidden});
          CHECK(l.gate.shape == std::vector<int64_t>{spec.ffn, spec.hidden});
          CHECK(l.up.shape == std::vector<int64_t>{spec.ffn, spec.hidden});
          CHECK(l.down.shape == std::vector<int64_t>{spec.hidden, spec.ffn});
          CHECK(l.q_bias.has_value() == dream);
          CHECK(l.k_bias.has_value() == dream);
          CHECK(l.v_bias.has_value() == dream);
        }
        // Roles map to the right tensors: compare bytes with what was written under each name.
        const std::string gate = dream ? "model.layers.1.mlp.gate_proj.weight"
                                       : "model.transformer.blocks.1.ff_proj.weight";
        const std::string down = dream ? "model.layers.1.mlp.down_proj.weight"
                                       : "model.transformer.blocks.1.ff_out.weight";
        const std::string head = dream ? "lm_head.weight" : "model.transformer.ff_out.weight";
        auto same = [](const TensorView& v, const testing::FixtureTensor& t) {
          return std::vector<uint8_t>(v.bytes.begin(), v.bytes.end()) == t.bytes;
        };
        CHECK(same(w->layers[1].gate, written.at(gate)));
        CHECK(same(w->layers[1].down, written.at(down)));
        CHECK(same(w->lm_head, written.at(head)));
        fs::remove_all(dir);
      }
    }
  }
}

TEST_CASE("MapModelWeights accepts the reference fixture models", "[model_weights]") {
  // Written by tools/pylib/safetensors_io.py, an independent writer.
  for (const char* name : {"llada_mha", "llada_gqa_f32", "dream_gqa", "dream_f16"}) {
    DYNAMIC_SECTION(name) {
      const fs::path dir = fs::path(DLLM_TEST_DATA_DIR) / "reference" / name;
      Loaded m = Load(dir);
      auto w = MapModelWeights(*m.checkpoint, m.config);
      if (!w.ok()) FAIL(Message(w.status()));
      CHECK(static_cast<int>(w->layers.size()) == m.config.num_layers);
      std::vector<float> values;
      w->final_norm.ToFloat(&values);
      CHECK(static_cast<int>(values.size()) == m.config.hidden_size);
    }
  }
}

}  // namespace
}  // namespace dllm
