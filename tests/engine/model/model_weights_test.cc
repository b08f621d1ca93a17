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
          std::vector<uint8_t> buffer;
          auto bytes = v.ReadBytes(&buffer);
          return bytes.ok() && std::vector<uint8_t>(bytes->begin(), bytes->end()) == t.bytes;
        };
        CHECK(same(w->layers[1].gate, written.at(gate)));
        CHECK(same(w->layers[1].down, written.at(down)));
        CHECK(same(w->lm_head, written.at(head)));
        fs::remove_all(dir);
      }
    }
  }
}

// In-memory checkpoint built from a tensor list, so tests can drop or reshape single tensors.
class FakeCheckpoint : public Checkpoint {
 public:
  explicit FakeCheckpoint(const TinyModelSpec& spec) {
    for (const auto& [name, shape] : testing::TinyModelShapes(spec)) Set(name, shape);
  }
  void Set(const std::string& name, std::vector<int64_t> shape) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    auto& storage = storage_[name];
    storage.assign(static_cast<size_t>(n) * 2, 0);
    TensorView v;
    v.name = name;
    v.dtype = DType::kBF16;
    v.shape = std::move(shape);
    v.bytes = std::span<const uint8_t>(storage);
    views_[name] = v;
  }
  void Erase(const std::string& name) { views_.erase(name); }
  absl::StatusOr<TensorView> Get(std::string_view name) const override {
    auto it = views_.find(std::string(name));
    if (it == views_.end()) return absl::NotFoundError("not in fake checkpoint");
    return it->second;
  }
  std::vector<std::string> TensorNames() const override {
    std::vector<std::string> names;
    for (const auto& [name, view] : views_) names.push_back(name);
    return names;
  }

 private:
  std::map<std::string, std::vector<uint8_t>> storage_;
  std::map<std::string, TensorView> views_;
};

ModelConfig ConfigFor(const TinyModelSpec& spec) {
  auto c = ParseModelConfig(testing::TinyModelConfigJson(spec), "config.json");
  REQUIRE(c.ok());
  return *c;
}

void CheckMapError(const FakeCheckpoint& ckpt, const ModelConfig& config,
                   std::initializer_list<std::string> parts) {
  auto w = MapModelWeights(ckpt, config);
  REQUIRE(!w.ok());
  const std::string message = Message(w.status());
  INFO(message);
  for (const std::string& part : parts) CHECK(message.find(part) != std::string::npos);
}

TEST_CASE("MapModelWeights: missing tensors are named with their expected shape",
          "[model_weights]") {
  for (bool dream : {false, true}) {
    TinyModelSpec spec;
    spec.dream = dream;
    const ModelConfig config = ConfigFor(spec);
    for (const auto& [name, shape] : testing::TinyModelShapes(spec)) {
      FakeCheckpoint ckpt(spec);
      ckpt.Erase(name);
      std::string expected = "[";
      for (size_t i = 0; i < shape.size(); ++i) {
        expected += (i ? ", " : "") + std::to_string(shape[i]);
      }
      expected += "]";
      CheckMapError(ckpt, config, {"missing tensor", "'" + name + "'", expected});
    }
  }
}

TEST_CASE("MapModelWeights: wrong shapes name tensor, found and expected shape",
          "[model_weights]") {
  TinyModelSpec spec;
  spec.dream = true;
  const ModelConfig config = ConfigFor(spec);
  {
    FakeCheckpoint ckpt(spec);
    ckpt.Set("model.layers.1.self_attn.k_proj.weight", {16, 16});  // MHA-sized, config is GQA
    CheckMapError(ckpt, config,
                  {"'model.layers.1.self_attn.k_proj.weight'", "[16, 16]", "expected [8, 16]"});
  }
  {
    FakeCheckpoint ckpt(spec);
    ckpt.Set("model.layers.0.mlp.down_proj.weight", {24, 16});  // transposed
    CheckMapError(ckpt, config, {"down_proj", "[24, 16]", "expected [16, 24]"});
  }
  {
    FakeCheckpoint ckpt(spec);
    ckpt.Set("lm_head.weight", {41, 16});
    CheckMapError(ckpt, config, {"lm_head.weight", "[41, 16]", "[40, 16]"});
  }
  {
    FakeCheckpoint ckpt(spec);
    ckpt.Set("model.norm.weight", {1, 16});
    CheckMapError(ckpt, config, {"model.norm.weight", "[1, 16]", "[16]"});
  }
}

TEST_CASE("MapModelWeights: config/checkpoint mismatches", "[model_weights]") {
  TinyModelSpec spec;
  const ModelConfig config = ConfigFor(spec);
  {
    // Checkpoint has a third layer the config does not declare.
    TinyModelSpec bigger = spec;
    bigger.layers = 3;
    FakeCheckpoint ckpt(bigger);
    CheckMapError(ckpt, config, {"model.transformer.blocks.2.attn_norm.weight", "2 layers"});
  }
  {
    FakeCheckpoint ckpt(spec);
    ckpt.Set("model.transformer.blocks.0.q_proj.bias", {16});
    CheckMapError(ckpt, config, {"q_proj.bias", "no q/k/v bias"});
  }
  {
    // LLaDA with include_qkv_bias: the biases become required.
    ModelConfig with_bias = config;
    with_bias.qkv_bias = true;
    FakeCheckpoint ckpt(spec);
    CheckMapError(ckpt, with_bias, {"missing tensor", "model.transformer.blocks.0.q_proj.bias"});
    for (int i = 0; i < 2; ++i) {
      const std::string p = "model.transformer.blocks." + std::to_string(i);
      ckpt.Set(p + ".q_proj.bias", {16});
      ckpt.Set(p + ".k_proj.bias", {16});
      ckpt.Set(p + ".v_proj.bias", {16});
    }
    auto w = MapModelWeights(ckpt, with_bias);
    REQUIRE(w.ok());
    CHECK(w->layers[1].v_bias->name == "model.transformer.blocks.1.v_proj.bias");
  }
}

TEST_CASE("MapModelWeights: tied embeddings reuse the embedding", "[model_weights]") {
  TinyModelSpec spec;
  spec.dream = true;
  ModelConfig config = ConfigFor(spec);
  FakeCheckpoint ckpt(spec);
  ckpt.Erase("lm_head.weight");
  CheckMapError(ckpt, config, {"lm_head.weight"});
  config.tie_word_embeddings = true;
  auto w = MapModelWeights(ckpt, config);
  REQUIRE(w.ok());
  CHECK(w->lm_head.name == "model.embed_tokens.weight");
  CHECK(w->lm_head.SameBytesAs(w->embed));
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
      REQUIRE(w->final_norm.ToFloat(&values).ok());
      CHECK(static_cast<int>(values.size()) == m.config.hidden_size);
    }
  }
}

}  // namespace
}  // namespace dllm
