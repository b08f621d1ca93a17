#include "engine/model/forward_random_model.h"

#include <cmath>
#include <string>

#include "engine/core/float16.h"

namespace dllm {
namespace {

// splitmix64: small, fast and good enough for test weights.
class SplitMix {
 public:
  explicit SplitMix(uint64_t seed) : state_(seed) {}
  uint64_t Next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  // Uniform in [-1, 1).
  float Symmetric() { return static_cast<float>(Next() >> 40) * (2.0f / 16777216.0f) - 1.0f; }

 private:
  uint64_t state_;
};

}  // namespace

std::unique_ptr<RandomModel> MakeRandomModel(const ModelConfig& config, uint64_t seed,
                                             DType dtype) {
  auto model = std::make_unique<RandomModel>();
  model->config = config;
  SplitMix rng(seed);
  const float kSqrt3 = std::sqrt(3.0f);
  auto tensor = [&](const std::string& name, std::vector<int64_t> shape, float std_dev,
                    float mean) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    TensorView view;
    view.name = name;
    view.shape = std::move(shape);
    if (dtype == DType::kBF16) {
      std::vector<uint16_t>& data = model->storage16.emplace_back(static_cast<size_t>(n));
      for (uint16_t& v : data) v = FloatToBf16(mean + std_dev * kSqrt3 * rng.Symmetric());
      view.dtype = DType::kBF16;
      view.bytes = std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(data.data()),
                                            data.size() * sizeof(uint16_t));
      return view;
    }
    std::vector<float>& data = model->storage.emplace_back(static_cast<size_t>(n));
    for (float& v : data) v = mean + std_dev * kSqrt3 * rng.Symmetric();
    view.dtype = DType::kF32;
    view.bytes = std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(data.data()),
                                          data.size() * sizeof(float));
    return view;
  };
  const ModelConfig& c = config;
  const int64_t hidden = c.hidden_size, q = int64_t{c.num_heads} * c.head_dim,
                kv = int64_t{c.num_kv_heads} * c.head_dim, inter = c.intermediate_size;
  const float in_hidden = 1.0f / std::sqrt(static_cast<float>(hidden));
  ModelWeights& w = model->weights;
  w.embed = tensor("embed", {c.vocab_size, hidden}, 1.0f, 0.0f);
  for (int l = 0; l < c.num_layers; ++l) {
    const std::string p = "layers." + std::to_string(l) + ".";
    LayerWeights& lw = w.layers.emplace_back();
    lw.attn_norm = tensor(p + "attn_norm", {hidden}, 0.1f, 1.0f);
    lw.q = tensor(p + "q", {q, hidden}, in_hidden, 0.0f);
    lw.k = tensor(p + "k", {kv, hidden}, in_hidden, 0.0f);
    lw.v = tensor(p + "v", {kv, hidden}, in_hidden, 0.0f);
    if (c.qkv_bias) {
      lw.q_bias = tensor(p + "q_bias", {q}, 0.1f, 0.0f);
      lw.k_bias = tensor(p + "k_bias", {kv}, 0.1f, 0.0f);
      lw.v_bias = tensor(p + "v_bias", {kv}, 0.1f, 0.0f);
    }
    lw.o = tensor(p + "o", {hidden, q}, 1.0f / std::sqrt(static_cast<float>(q)), 0.0f);
    lw.ffn_norm = tensor(p + "ffn_norm", {hidden}, 0.1f, 1.0f);
    lw.gate = tensor(p + "gate", {inter, hidden}, in_hidden, 0.0f);
    lw.up = tensor(p + "up", {inter, hidden}, in_hidden, 0.0f);
    lw.down =
        tensor(p + "down", {hidden, inter}, 1.0f / std::sqrt(static_cast<float>(inter)), 0.0f);
  }
  w.final_norm = tensor("final_norm", {hidden}, 0.1f, 1.0f);
  w.lm_head = tensor("lm_head", {c.vocab_size, hidden}, 2.0f * in_hidden, 0.0f);
  return model;
}

ModelConfig RandomModelConfig(ModelFamily family, int hidden, int layers, int heads, int kv_heads,
                              int intermediate, int vocab, int max_positions) {
  ModelConfig c;
  c.family = family;
  c.hidden_size = hidden;
  c.num_layers = layers;
  c.num_heads = heads;
  c.num_kv_heads = kv_heads;
  c.head_dim = hidden / heads;
  c.intermediate_size = intermediate;
  c.vocab_size = vocab;
  c.max_positions = max_positions;
  // The published models' values: Dream (Qwen2.5) has q/k/v biases and its RoPE base and
  // norm epsilon; LLaDA neither.
  const bool dream = family == ModelFamily::kDream;
  c.rope_theta = dream ? 1000000.0f : 500000.0f;
  c.norm_eps = dream ? 1e-6f : 1e-5f;
  c.qkv_bias = dream;
  c.shift_logits = FamilyInfo(family).shift_logits;
  c.rope_in_bf16 = FamilyInfo(family).rope_in_bf16;
  c.mask_token_id = vocab - 1;
  c.eos_token_id = vocab - 2;
  c.pad_token_id = vocab - 2;
  return c;
}

}  // namespace dllm
