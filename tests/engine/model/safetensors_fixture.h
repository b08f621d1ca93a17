// Test helpers that write safetensors files and tiny model folders into temp directories.
//
// WriteSafetensors produces a well-formed file the way the Python `safetensors` package does
// (header padded with spaces to a multiple of 8, tensors packed back to back in the given
// order). WriteRawSafetensors writes whatever header text/length it is given, for corruption
// tests. WriteTinyModel writes config.json plus weights for a small LLaDA- or Dream-shaped
// model with deterministic pseudo-random values, optionally split over several shards with
// each layer's tensors spread across them (as in the real checkpoints).
#ifndef DLLM_TESTS_ENGINE_MODEL_SAFETENSORS_FIXTURE_H_
#define DLLM_TESTS_ENGINE_MODEL_SAFETENSORS_FIXTURE_H_

#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/core/float16.h"
#include "nlohmann/json.hpp"

namespace dllm::testing {

struct FixtureTensor {
  std::string name;
  std::string dtype;  // safetensors spelling: "BF16", "F16", "F32", "I8", ...
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};

inline std::vector<uint8_t> Bf16Bytes(const std::vector<float>& values) {
  std::vector<uint8_t> out(values.size() * 2);
  for (size_t i = 0; i < values.size(); ++i) {
    const uint16_t h = FloatToBf16(values[i]);
    std::memcpy(out.data() + 2 * i, &h, 2);
  }
  return out;
}

inline std::vector<uint8_t> F32Bytes(const std::vector<float>& values) {
  std::vector<uint8_t> out(values.size() * 4);
  if (!values.empty()) std::memcpy(out.data(), values.data(), out.size());
  return out;
}

// A fresh, empty directory under the system temp dir, unique per call.
inline std::filesystem::path MakeTempDir(const std::string& tag) {
  static int counter = 0;
  std::filesystem::path dir =
      std::filesystem::temp_directory_path() /
      ("dllm_test_" + tag + "_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

inline void WriteBytes(const std::filesystem::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) throw std::runtime_error("cannot write " + path.string());
}

// Writes `header_json` preceded by `header_length` (default: its real length) and followed by
// `data`. No validation: this is how corrupt files are made.
inline void WriteRawSafetensors(const std::filesystem::path& path, const std::string& header_json,
                                const std::string& data,
                                std::optional<uint64_t> header_length = std::nullopt) {
  const uint64_t n = header_length.value_or(header_json.size());
  std::string bytes(8, '\0');
  std::memcpy(bytes.data(), &n, 8);  // little-endian host
  bytes += header_json;
  bytes += data;
  WriteBytes(path, bytes);
}

// The header JSON WriteSafetensors would write (before padding), exposed so that tests can
// edit one field and write it raw.
inline nlohmann::json SafetensorsHeaderJson(
    const std::vector<FixtureTensor>& tensors,
    const std::map<std::string, std::string>& metadata = {}) {
  nlohmann::json header = nlohmann::json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const auto& t : tensors) {
    header[t.name] = {{"dtype", t.dtype},
                      {"shape", t.shape},
                      {"data_offsets", {offset, offset + t.bytes.size()}}};
    offset += t.bytes.size();
  }
  return header;
}

inline std::string PackedData(const std::vector<FixtureTensor>& tensors) {
  std::string data;
  for (const auto& t : tensors) data.append(t.bytes.begin(), t.bytes.end());
  return data;
}

inline std::string PaddedHeader(const nlohmann::json& header) {
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  return text;
}

inline void WriteSafetensors(const std::filesystem::path& path,
                             const std::vector<FixtureTensor>& tensors,
                             const std::map<std::string, std::string>& metadata = {}) {
  WriteRawSafetensors(path, PaddedHeader(SafetensorsHeaderJson(tensors, metadata)),
                      PackedData(tensors));
}

struct TinyModelSpec {
  bool dream = false;  // false: LLaDA names/config; true: Dream (Qwen2) names/config
  int hidden = 16;
  int layers = 2;
  int heads = 4;
  int kv_heads = 2;  // Dream only; LLaDA is written as MHA
  int ffn = 24;
  int vocab = 40;
  int shards = 1;  // 1: model.safetensors; >1: index + shards, layers spread round-robin
  uint32_t seed = 1;
};

// The tensors (name -> shape) a tiny model of `spec` has, in a fixed order.
inline std::vector<std::pair<std::string, std::vector<int64_t>>> TinyModelShapes(
    const TinyModelSpec& s) {
  const int64_t h = s.hidden, f = s.ffn, v = s.vocab, hd = s.hidden / s.heads;
  const int64_t kv = s.dream ? s.kv_heads * hd : h;
  std::vector<std::pair<std::string, std::vector<int64_t>>> out;
  if (!s.dream) {
    out.push_back({"model.transformer.wte.weight", {v, h}});
    for (int i = 0; i < s.layers; ++i) {
      const std::string p = "model.transformer.blocks." + std::to_string(i);
      out.push_back({p + ".attn_norm.weight", {h}});
      out.push_back({p + ".q_proj.weight", {h, h}});
      out.push_back({p + ".k_proj.weight", {kv, h}});
      out.push_back({p + ".v_proj.weight", {kv, h}});
      out.push_back({p + ".attn_out.weight", {h, h}});
      out.push_back({p + ".ff_norm.weight", {h}});
      out.push_back({p + ".ff_proj.weight", {f, h}});
      out.push_back({p + ".up_proj.weight", {f, h}});
      out.push_back({p + ".ff_out.weight", {h, f}});
    }
    out.push_back({"model.transformer.ln_f.weight", {h}});
    out.push_back({"model.transformer.ff_out.weight", {v, h}});
  } else {
    out.push_back({"model.embed_tokens.weight", {v, h}});
    for (int i = 0; i < s.layers; ++i) {
      const std::string p = "model.layers." + std::to_string(i);
      out.push_back({p + ".input_layernorm.weight", {h}});
      out.push_back({p + ".self_attn.q_proj.weight", {h, h}});
      out.push_back({p + ".self_attn.q_proj.bias", {h}});
      out.push_back({p + ".self_attn.k_proj.weight", {kv, h}});
      out.push_back({p + ".self_attn.k_proj.bias", {kv}});
      out.push_back({p + ".self_attn.v_proj.weight", {kv, h}});
      out.push_back({p + ".self_attn.v_proj.bias", {kv}});
      out.push_back({p + ".self_attn.o_proj.weight", {h, h}});
      out.push_back({p + ".post_attention_layernorm.weight", {h}});
      out.push_back({p + ".mlp.gate_proj.weight", {f, h}});
      out.push_back({p + ".mlp.up_proj.weight", {f, h}});
      out.push_back({p + ".mlp.down_proj.weight", {h, f}});
    }
    out.push_back({"model.norm.weight", {h}});
    out.push_back({"lm_head.weight", {v, h}});
  }
  return out;
}

inline std::string TinyModelConfigJson(const TinyModelSpec& s) {
  nlohmann::json c;
  if (!s.dream) {
    c = {{"model_type", "llada"},        {"d_model", s.hidden},
         {"n_layers", s.layers},         {"n_heads", s.heads},
         {"n_kv_heads", s.heads},        {"mlp_hidden_size", s.ffn},
         {"vocab_size", s.vocab},        {"embedding_size", s.vocab},
         {"rope_theta", 500000.0},       {"rms_norm_eps", 1e-5},
         {"include_qkv_bias", false},    {"max_sequence_length", 64},
         {"mask_token_id", s.vocab - 4}, {"eos_token_id", s.vocab - 3},
         {"pad_token_id", s.vocab - 3},  {"weight_tying", false}};
  } else {
    c = {{"model_type", "Dream"},
         {"hidden_size", s.hidden},
         {"num_hidden_layers", s.layers},
         {"num_attention_heads", s.heads},
         {"num_key_value_heads", s.kv_heads},
         {"intermediate_size", s.ffn},
         {"vocab_size", s.vocab},
         {"rope_theta", 1000000.0},
         {"rms_norm_eps", 1e-6},
         {"max_position_embeddings", 64},
         {"mask_token_id", s.vocab - 1},
         {"bos_token_id", s.vocab - 4},
         {"eos_token_id", s.vocab - 4},
         {"pad_token_id", s.vocab - 4},
         {"hidden_act", "silu"},
         {"rope_scaling", nullptr},
         {"tie_word_embeddings", false}};
  }
  return c.dump(2);
}

// Writes config.json and BF16 weights (values uniform in [-0.5, 0.5), norms around 1).
// Returns the tensors written, by name, so tests can compare values.
inline std::map<std::string, FixtureTensor> WriteTinyModel(const std::filesystem::path& dir,
                                                           const TinyModelSpec& spec) {
  std::mt19937 rng(spec.seed);
  std::uniform_real_distribution<float> dist(-0.5f, 0.5f);
  std::map<std::string, FixtureTensor> all;
  std::vector<std::vector<FixtureTensor>> shard_tensors(spec.shards);
  size_t index = 0;
  for (const auto& [name, shape] : TinyModelShapes(spec)) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    std::vector<float> values(n);
    const bool is_norm = name.find("norm") != std::string::npos;
    for (float& x : values) x = is_norm ? 1.0f + dist(rng) * 0.2f : dist(rng);
    FixtureTensor t{name, "BF16", shape, Bf16Bytes(values)};
    all[name] = t;
    shard_tensors[index++ % spec.shards].push_back(t);  // round-robin spreads each layer
  }
  WriteBytes(dir / "config.json", TinyModelConfigJson(spec));
  if (spec.shards == 1) {
    WriteSafetensors(dir / "model.safetensors", shard_tensors[0]);
  } else {
    nlohmann::json weight_map = nlohmann::json::object();
    for (int s = 0; s < spec.shards; ++s) {
      char name[64];
      std::snprintf(name, sizeof name, "model-%05d-of-%05d.safetensors", s + 1, spec.shards);
      WriteSafetensors(dir / name, shard_tensors[s]);
      for (const auto& t : shard_tensors[s]) weight_map[t.name] = name;
    }
    nlohmann::json index = {{"metadata", {{"total_size", 0}}}, {"weight_map", weight_map}};
    WriteBytes(dir / "model.safetensors.index.json", index.dump(2));
  }
  return all;
}

}  // namespace dllm::testing

#endif  // DLLM_TESTS_ENGINE_MODEL_SAFETENSORS_FIXTURE_H_
