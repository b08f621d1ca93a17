// Family-specific tensor names -> ModelWeights, with every shape checked against the config.
#include "engine/model/model_weights.h"

#include <string>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/core/status_macros.h"

namespace dllm {
namespace {

// The per-layer tensor names of one family. `layer` is spliced between prefix and suffix.
struct LayerNames {
  std::string prefix;  // e.g. "model.transformer.blocks."
  std::string attn_norm, q, k, v, o, ffn_norm, gate, up, down;
  std::string q_bias, k_bias, v_bias;
};

struct FamilyNames {
  std::string embed, final_norm, lm_head;
  LayerNames layer;
  std::string layers_field;  // the config.json field that declares the layer count
};

FamilyNames NamesFor(ModelFamily family) {
  switch (family) {
    case ModelFamily::kLlada:
      return {"model.transformer.wte.weight",
              "model.transformer.ln_f.weight",
              "model.transformer.ff_out.weight",
              {"model.transformer.blocks.", ".attn_norm.weight", ".q_proj.weight", ".k_proj.weight",
               ".v_proj.weight", ".attn_out.weight", ".ff_norm.weight", ".ff_proj.weight",
               ".up_proj.weight", ".ff_out.weight", ".q_proj.bias", ".k_proj.bias", ".v_proj.bias"},
              "n_layers"};
    case ModelFamily::kDream:
      break;
  }
  return {"model.embed_tokens.weight",
          "model.norm.weight",
          "lm_head.weight",
          {"model.layers.", ".input_layernorm.weight", ".self_attn.q_proj.weight",
           ".self_attn.k_proj.weight", ".self_attn.v_proj.weight", ".self_attn.o_proj.weight",
           ".post_attention_layernorm.weight", ".mlp.gate_proj.weight", ".mlp.up_proj.weight",
           ".mlp.down_proj.weight", ".self_attn.q_proj.bias", ".self_attn.k_proj.bias",
           ".self_attn.v_proj.bias"},
          "num_hidden_layers"};
}

std::string ShapeString(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

class Resolver {
 public:
  explicit Resolver(const Checkpoint& checkpoint) : checkpoint_(checkpoint) {}

  absl::Status Get(const std::string& name, const std::vector<int64_t>& expected, TensorView* out) {
    auto view = checkpoint_.Get(name);
    if (!view.ok()) {
      return absl::NotFoundError(absl::StrCat("missing tensor '", name, "' (expected shape ",
                                              ShapeString(expected),
                                              "): ", view.status().message()));
    }
    if (view->shape != expected) {
      return absl::InvalidArgumentError(absl::StrCat("tensor '", name, "' has shape ",
                                                     ShapeString(view->shape), ", expected ",
                                                     ShapeString(expected)));
    }
    *out = *std::move(view);
    return absl::OkStatus();
  }

 private:
  const Checkpoint& checkpoint_;
};

}  // namespace

absl::StatusOr<ModelWeights> MapModelWeights(const Checkpoint& checkpoint,
                                             const ModelConfig& config) {
  if (config.num_layers <= 0 || config.hidden_size <= 0 || config.num_heads <= 0 ||
      config.num_kv_heads <= 0 || config.head_dim <= 0 || config.intermediate_size <= 0 ||
      config.vocab_size <= 0) {
    return absl::InvalidArgumentError("MapModelWeights: config has non-positive sizes");
  }
  const FamilyNames names = NamesFor(config.family);
  const int64_t hidden = config.hidden_size;
  const int64_t q_rows = int64_t{config.num_heads} * config.head_dim;
  const int64_t kv_rows = int64_t{config.num_kv_heads} * config.head_dim;
  const int64_t ffn = config.intermediate_size;
  const int64_t vocab = config.vocab_size;

  Resolver r(checkpoint);
  ModelWeights w;
  DLLM_RETURN_IF_ERROR(r.Get(names.embed, {vocab, hidden}, &w.embed));
  DLLM_RETURN_IF_ERROR(r.Get(names.final_norm, {hidden}, &w.final_norm));
  if (config.tie_word_embeddings && !checkpoint.Get(names.lm_head).ok()) {
    w.lm_head = w.embed;
  } else {
    DLLM_RETURN_IF_ERROR(r.Get(names.lm_head, {vocab, hidden}, &w.lm_head));
  }

  const LayerNames& ln = names.layer;
  // The layer count comes from config.json and is untrusted: check that the checkpoint holds
  // some tensor of the last declared layer before sizing anything by it (n_layers = 2^31-1
  // would otherwise abort with bad_alloc), and grow the vector only as layers resolve. A
  // checkpoint that has the layer but lacks one of its tensors is reported by the loop below,
  // naming that tensor.
  const std::string last = absl::StrCat(ln.prefix, config.num_layers - 1, ".");
  bool has_last = false;
  for (const std::string& name : checkpoint.TensorNames()) {
    if (absl::StartsWith(name, last)) {
      has_last = true;
      break;
    }
  }
  if (!has_last) {
    return absl::InvalidArgumentError(
        absl::StrCat("config.json field \"", names.layers_field, "\" declares ", config.num_layers,
                     " layers but the checkpoint has no tensor of layer ", config.num_layers - 1,
                     " ('", last, "*')"));
  }
  for (int i = 0; i < config.num_layers; ++i) {
    const std::string p = absl::StrCat(ln.prefix, i);
    LayerWeights& l = w.layers.emplace_back();
    DLLM_RETURN_IF_ERROR(r.Get(p + ln.attn_norm, {hidden}, &l.attn_norm));
    DLLM_RETURN_IF_ERROR(r.Get(p + ln.q, {q_rows, hidden}, &l.q));
    DLLM_RETURN_IF_ERROR(r.Get(p + ln.k, {kv_rows, hidden}, &l.k));
    DLLM_RETURN_IF_ERROR(r.Get(p + ln.v, {kv_rows, hidden}, &l.v));
    if (config.qkv_bias) {
      l.q_bias.emplace();
      l.k_bias.emplace();
      l.v_bias.emplace();
      DLLM_RETURN_IF_ERROR(r.Get(p + ln.q_bias, {q_rows}, &*l.q_bias));
      DLLM_RETURN_IF_ERROR(r.Get(p + ln.k_bias, {kv_rows}, &*l.k_bias));
      DLLM_RETURN_IF_ERROR(r.Get(p + ln.v_bias, {kv_rows}, &*l.v_bias));
    }
    DLLM_RETURN_IF_ERROR(r.Get(p + ln.o, {hidden, q_rows}, &l.o));
    DLLM_RETURN_IF_ERROR(r.Get(p + ln.ffn_norm, {hidden}, &l.ffn_norm));
    DLLM_RETURN_IF_ERROR(r.Get(p + ln.gate, {ffn, hidden}, &l.gate));
    DLLM_RETURN_IF_ERROR(r.Get(p + ln.up, {ffn, hidden}, &l.up));
    DLLM_RETURN_IF_ERROR(r.Get(p + ln.down, {hidden, ffn}, &l.down));
  }

  // Biases the config does not expect would otherwise be silently dropped.
  if (!config.qkv_bias) {
    const std::string bias = absl::StrCat(ln.prefix, 0, ln.q_bias);
    if (checkpoint.Get(bias).ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("checkpoint has tensor '", bias, "' but the config declares no q/k/v bias"));
    }
  }
  // A checkpoint with more layers than the config is a config/checkpoint mismatch that would
  // otherwise silently run a truncated model.
  const std::string extra = absl::StrCat(ln.prefix, config.num_layers, ln.attn_norm);
  if (checkpoint.Get(extra).ok()) {
    return absl::InvalidArgumentError(absl::StrCat("checkpoint has tensor '", extra,
                                                   "' but the config declares only ",
                                                   config.num_layers, " layers"));
  }
  return w;
}

}  // namespace dllm
