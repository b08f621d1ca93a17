// config.json -> ModelConfig for LLaDA (OLMo-style field names) and Dream (Qwen2 names).
//
// Fields the engine needs are required (or have the documented HF default); fields that would
// change the architecture in ways the engine does not implement (biases on every Linear, ALiBi,
// QK layer norm, rope scaling, sliding window, ...) are rejected by name rather than ignored,
// so that an unsupported checkpoint fails at load instead of producing garbage.
#include "engine/model/model_config.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "engine/core/file_text.h"
#include "engine/core/status_macros.h"
#include "nlohmann/json.hpp"

namespace dllm {
namespace {

using Json = nlohmann::json;

constexpr char kSupportedTypes[] = "\"llada\" (LLaDA), \"Dream\" (Dream)";
constexpr int32_t kLladaDefaultMaskTokenId = 126336;
constexpr uintmax_t kMaxConfigBytes = 16ull << 20;

// absl 20220623 (Debian) has its own string_view type; std::string_view must be converted.
absl::string_view Av(std::string_view s) { return absl::string_view(s.data(), s.size()); }

// Small reader that remembers the file name for every error.
class Fields {
 public:
  Fields(const Json& root, std::string_view source) : root_(root), source_(source) {}

  absl::Status Error(std::string_view field, std::string_view what) const {
    return absl::InvalidArgumentError(
        absl::StrCat(Av(source_), ": field \"", Av(field), "\" ", Av(what)));
  }

  bool Has(std::string_view field) const {
    auto it = root_.find(field);
    return it != root_.end() && !it->is_null();
  }

  // Required positive integer that fits an int.
  absl::StatusOr<int> PositiveInt(std::string_view field) const {
    auto it = root_.find(field);
    if (it == root_.end() || it->is_null()) return Error(field, "is missing");
    return CheckPositiveInt(field, *it);
  }

  absl::StatusOr<int> CheckPositiveInt(std::string_view field, const Json& v) const {
    if (!v.is_number_integer()) return Error(field, "must be an integer");
    const bool in_range =
        v.is_number_unsigned()
            ? (v.get<uint64_t>() >= 1 && v.get<uint64_t>() <= std::numeric_limits<int>::max())
            : v.get<int64_t>() >= 1;
    if (!in_range) {
      return Error(field, absl::StrCat("must be a positive integer below 2^31, got ", v.dump()));
    }
    return v.get<int>();
  }

  // Required positive finite number.
  absl::StatusOr<float> PositiveFloat(std::string_view field) const {
    auto it = root_.find(field);
    if (it == root_.end() || it->is_null()) return Error(field, "is missing");
    if (!it->is_number()) return Error(field, "must be a number");
    const double v = it->get<double>();
    // The value is stored as fp32: anything below the smallest normal float would round to
    // zero or a denormal (1e-50 became 0 and an RMSNorm divided by it).
    if (!std::isfinite(v) || v < std::numeric_limits<float>::min() ||
        v > std::numeric_limits<float>::max()) {
      return Error(field, absl::StrCat("must be a positive finite fp32 number (",
                                       std::numeric_limits<float>::min(), " to ",
                                       std::numeric_limits<float>::max(), "), got ", it->dump()));
    }
    return static_cast<float>(v);
  }

  // Optional token id; -1 when absent or null. A list (HF allows several eos ids) yields its
  // first element.
  absl::StatusOr<int32_t> TokenId(std::string_view field, int32_t default_value) const {
    auto it = root_.find(field);
    if (it == root_.end() || it->is_null()) return default_value;
    const Json* v = &*it;
    if (v->is_array()) {
      if (v->empty()) return default_value;
      v = &(*v)[0];
    }
    if (!v->is_number_integer() ||
        (v->is_number_unsigned() ? v->get<uint64_t>() > std::numeric_limits<int32_t>::max()
                                 : v->get<int64_t>() < 0)) {
      return Error(field, absl::StrCat("must be a non-negative token id, got ", it->dump()));
    }
    return v->get<int32_t>();
  }

  // Optional boolean with a default.
  absl::StatusOr<bool> Bool(std::string_view field, bool default_value) const {
    auto it = root_.find(field);
    if (it == root_.end() || it->is_null()) return default_value;
    if (!it->is_boolean()) return Error(field, "must be true or false");
    return it->get<bool>();
  }

  // Optional string; empty when absent or null.
  absl::StatusOr<std::string> String(std::string_view field) const {
    auto it = root_.find(field);
    if (it == root_.end() || it->is_null()) return std::string();
    if (!it->is_string()) return Error(field, "must be a string");
    return it->get<std::string>();
  }

  // Rejects a boolean feature flag that the engine does not implement.
  absl::Status RequireFalse(std::string_view field, std::string_view feature) const {
    auto v = Bool(field, false);
    if (!v.ok()) return v.status();
    if (*v) return Error(field, absl::StrCat("is true: ", Av(feature), " is not supported"));
    return absl::OkStatus();
  }

  // Rejects a string option whose value is not in `allowed` (absent is fine).
  absl::Status RequireOneOf(std::string_view field,
                            std::initializer_list<std::string_view> allowed) const {
    auto v = String(field);
    if (!v.ok()) return v.status();
    if (v->empty()) return absl::OkStatus();
    for (std::string_view a : allowed) {
      if (*v == a) return absl::OkStatus();
    }
    return Error(field, absl::StrCat("is \"", *v, "\", which is not supported"));
  }

 private:
  const Json& root_;
  std::string_view source_;
};

#define DLLM_ASSIGN_OR_RETURN_FIELD(lhs, expr) \
  do {                                         \
    auto _v = (expr);                          \
    if (!_v.ok()) return _v.status();          \
    (lhs) = *_v;                               \
  } while (0)

absl::Status ParseLlada(const Fields& f, ModelConfig* c) {
  DLLM_ASSIGN_OR_RETURN_FIELD(c->hidden_size, f.PositiveInt("d_model"));
  DLLM_ASSIGN_OR_RETURN_FIELD(c->num_layers, f.PositiveInt("n_layers"));
  DLLM_ASSIGN_OR_RETURN_FIELD(c->num_heads, f.PositiveInt("n_heads"));
  c->num_kv_heads = c->num_heads;  // OLMo: n_kv_heads null means MHA
  if (f.Has("n_kv_heads"))
    DLLM_ASSIGN_OR_RETURN_FIELD(c->num_kv_heads, f.PositiveInt("n_kv_heads"));
  DLLM_ASSIGN_OR_RETURN_FIELD(c->intermediate_size, f.PositiveInt("mlp_hidden_size"));
  // The embedding and LM head have embedding_size rows (vocab_size padded up) when given.
  if (f.Has("embedding_size")) {
    DLLM_ASSIGN_OR_RETURN_FIELD(c->vocab_size, f.PositiveInt("embedding_size"));
    int vocab = 0;
    DLLM_ASSIGN_OR_RETURN_FIELD(vocab, f.PositiveInt("vocab_size"));
    if (vocab > c->vocab_size) {
      return f.Error("embedding_size", absl::StrCat("(", c->vocab_size,
                                                    ") is smaller than vocab_size (", vocab, ")"));
    }
  } else {
    DLLM_ASSIGN_OR_RETURN_FIELD(c->vocab_size, f.PositiveInt("vocab_size"));
  }
  DLLM_ASSIGN_OR_RETURN_FIELD(c->max_positions, f.PositiveInt("max_sequence_length"));
  DLLM_ASSIGN_OR_RETURN_FIELD(c->rope_theta, f.PositiveFloat("rope_theta"));
  DLLM_ASSIGN_OR_RETURN_FIELD(c->norm_eps, f.PositiveFloat("rms_norm_eps"));
  DLLM_ASSIGN_OR_RETURN_FIELD(c->qkv_bias, f.Bool("include_qkv_bias", false));
  DLLM_ASSIGN_OR_RETURN_FIELD(c->tie_word_embeddings, f.Bool("weight_tying", false));
  DLLM_ASSIGN_OR_RETURN_FIELD(c->mask_token_id,
                              f.TokenId("mask_token_id", kLladaDefaultMaskTokenId));
  DLLM_ASSIGN_OR_RETURN_FIELD(c->eos_token_id, f.TokenId("eos_token_id", -1));
  DLLM_ASSIGN_OR_RETURN_FIELD(c->pad_token_id, f.TokenId("pad_token_id", -1));
  DLLM_ASSIGN_OR_RETURN_FIELD(c->bos_token_id, f.TokenId("bos_token_id", -1));

  // Architecture switches of the OLMo/LLaDA code base that the engine does not implement.
  DLLM_RETURN_IF_ERROR(f.RequireFalse("include_bias", "bias on every Linear layer"));
  DLLM_RETURN_IF_ERROR(f.RequireFalse("bias_for_layer_norm", "layer norm bias"));
  DLLM_RETURN_IF_ERROR(f.RequireFalse("attention_layer_norm", "QK layer norm"));
  DLLM_RETURN_IF_ERROR(f.RequireFalse("alibi", "ALiBi"));
  DLLM_RETURN_IF_ERROR(f.RequireFalse("input_emb_norm", "embedding norm"));
  DLLM_RETURN_IF_ERROR(f.RequireFalse("scale_logits", "logit scaling"));
  DLLM_RETURN_IF_ERROR(f.RequireFalse("multi_query_attention", "multi-query attention"));
  auto rope = f.Bool("rope", true);
  if (!rope.ok()) return rope.status();
  if (!*rope) return f.Error("rope", "is false: only rotary position embeddings are supported");
  DLLM_RETURN_IF_ERROR(f.RequireOneOf("block_type", {"llama"}));
  DLLM_RETURN_IF_ERROR(f.RequireOneOf("activation_type", {"silu", "swiglu"}));
  DLLM_RETURN_IF_ERROR(f.RequireOneOf("layer_norm_type", {"rms"}));
  return absl::OkStatus();
}

absl::Status ParseDream(const Fields& f, ModelConfig* c) {
  DLLM_ASSIGN_OR_RETURN_FIELD(c->hidden_size, f.PositiveInt("hidden_size"));
  DLLM_ASSIGN_OR_RETURN_FIELD(c->num_layers, f.PositiveInt("num_hidden_layers"));
  DLLM_ASSIGN_OR_RETURN_FIELD(c->num_heads, f.PositiveInt("num_attention_heads"));
  c->num_kv_heads = c->num_heads;  // HF Qwen2 default when absent
  if (f.Has("num_key_value_heads")) {
    DLLM_ASSIGN_OR_RETURN_FIELD(c->num_kv_heads, f.PositiveInt("num_key_value_heads"));
  }
  DLLM_ASSIGN_OR_RETURN_FIELD(c->intermediate_size, f.PositiveInt("intermediate_size"));
  DLLM_ASSIGN_OR_RETURN_FIELD(c->vocab_size, f.PositiveInt("vocab_size"));
  DLLM_ASSIGN_OR_RETURN_FIELD(c->max_positions, f.PositiveInt("max_position_embeddings"));
  DLLM_ASSIGN_OR_RETURN_FIELD(c->rope_theta, f.PositiveFloat("rope_theta"));
  DLLM_ASSIGN_OR_RETURN_FIELD(c->norm_eps, f.PositiveFloat("rms_norm_eps"));
  DLLM_ASSIGN_OR_RETURN_FIELD(c->tie_word_embeddings, f.Bool("tie_word_embeddings", false));
  c->qkv_bias = true;
  if (!f.Has("mask_token_id")) return f.Error("mask_token_id", "is missing");
  DLLM_ASSIGN_OR_RETURN_FIELD(c->mask_token_id, f.TokenId("mask_token_id", -1));
  DLLM_ASSIGN_OR_RETURN_FIELD(c->eos_token_id, f.TokenId("eos_token_id", -1));
  DLLM_ASSIGN_OR_RETURN_FIELD(c->pad_token_id, f.TokenId("pad_token_id", -1));
  DLLM_ASSIGN_OR_RETURN_FIELD(c->bos_token_id, f.TokenId("bos_token_id", -1));

  DLLM_RETURN_IF_ERROR(f.RequireOneOf("hidden_act", {"silu"}));
  DLLM_RETURN_IF_ERROR(f.RequireFalse("use_sliding_window", "sliding-window attention"));
  DLLM_RETURN_IF_ERROR(f.RequireFalse("use_mrope", "multimodal RoPE"));
  if (f.Has("rope_scaling"))
    return f.Error("rope_scaling", "is set: RoPE scaling is not supported");
  return absl::OkStatus();
}

absl::Status Validate(const ModelConfig& c, std::string_view source_std) {
  const absl::string_view source = Av(source_std);
  auto error = [&](absl::string_view what) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": ", what));
  };
  if (c.hidden_size % c.num_heads != 0) {
    return error(absl::StrCat("hidden size ", c.hidden_size, " is not divisible by the ",
                              c.num_heads, " attention heads"));
  }
  if (c.num_kv_heads > c.num_heads || c.num_heads % c.num_kv_heads != 0) {
    return error(absl::StrCat(c.num_kv_heads, " key/value heads do not divide the ", c.num_heads,
                              " attention heads"));
  }
  const struct {
    const char* name;
    int32_t id;
  } ids[] = {{"mask_token_id", c.mask_token_id},
             {"eos_token_id", c.eos_token_id},
             {"pad_token_id", c.pad_token_id},
             {"bos_token_id", c.bos_token_id}};
  for (const auto& [name, id] : ids) {
    if (id >= c.vocab_size) {
      return error(absl::StrCat(name, " ", id, " is outside the vocabulary of ", c.vocab_size));
    }
  }
  // A mask token that is also end-of-sequence makes every still-masked position look like
  // the end of the answer: the model loads but answers nonsense.
  if (c.mask_token_id >= 0 && c.mask_token_id == c.eos_token_id) {
    return error(absl::StrCat("mask_token_id and eos_token_id are both ", c.mask_token_id,
                              ": the mask token must differ from end-of-sequence"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ModelConfig> ParseModelConfig(std::string_view json_text,
                                             std::string_view source_std) {
  const absl::string_view source = Av(source_std);
  Json root;
  try {
    root = Json::parse(json_text);
  } catch (const Json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": invalid JSON: ", e.what()));
  }
  if (!root.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": must be a JSON object"));
  }
  Fields fields(root, source_std);
  auto model_type = root.find("model_type");
  if (model_type == root.end() || !model_type->is_string()) {
    return absl::InvalidArgumentError(absl::StrCat(
        source, ": field \"model_type\" is missing or not a string; supported: ", kSupportedTypes));
  }
  const std::string type = absl::AsciiStrToLower(model_type->get<std::string>());
  const ModelFamilyInfo* family = FamilyByModelType(type);
  if (family == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": model_type \"", model_type->get<std::string>(),
                     "\" is not supported; supported: ", kSupportedTypes));
  }
  ModelConfig config;
  config.family = family->family;
  config.shift_logits = family->shift_logits;
  config.rope_in_bf16 = family->rope_in_bf16;
  // The config.json readers differ in more than key names (LLaDA's padded embedding_size, the
  // OLMo switches it must refuse), so each family has its own function.
  absl::Status status;
  switch (family->family) {
    case ModelFamily::kLlada:
      status = ParseLlada(fields, &config);
      break;
    case ModelFamily::kDream:
      status = ParseDream(fields, &config);
      break;
  }
  if (!status.ok()) return status;
  config.head_dim = config.hidden_size / config.num_heads;
  config.eot_token_id = -1;  // filled from the tokenizer by the model loader
  if (absl::Status s = Validate(config, source_std); !s.ok()) return s;
  return config;
}

absl::StatusOr<ModelConfig> LoadModelConfig(const std::string& model_dir) {
  const std::string path = (std::filesystem::path(model_dir) / "config.json").string();
  DLLM_ASSIGN_OR_RETURN(text, ReadFileText(path, kMaxConfigBytes));
  return ParseModelConfig(text, path);
}

}  // namespace dllm
