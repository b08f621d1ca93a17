// Family-specific tensor names (engine/core/model_family.h) -> ModelWeights, with every shape
// checked against the config.
#include "engine/model/model_weights.h"

#include <string>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/core/status_macros.h"

namespace dllm {
namespace {

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

namespace {

// The layer count comes from config.json and is untrusted: check that the checkpoint holds
// some tensor of the last declared layer before sizing anything by it (n_layers = 2^31-1
// would otherwise abort with bad_alloc). A checkpoint that has the layer but lacks one of its
// tensors is reported by MapLayer, naming that tensor.
absl::Status CheckLastLayer(const Checkpoint& checkpoint, const ModelConfig& config,
                            const ModelFamilyInfo& names) {
  const std::string last = absl::StrCat(names.layer.prefix, config.num_layers - 1, ".");
  for (const std::string& name : checkpoint.TensorNames()) {
    if (absl::StartsWith(name, last)) return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      absl::StrCat("config.json field \"", names.layers_field, "\" declares ", config.num_layers,
                   " layers but the checkpoint has no tensor of layer ", config.num_layers - 1,
                   " ('", last, "*')"));
}

// The shapes of one layer's tensors.
struct LayerShapes {
  explicit LayerShapes(const ModelConfig& c)
      : hidden(c.hidden_size),
        q_rows(int64_t{c.num_heads} * c.head_dim),
        kv_rows(int64_t{c.num_kv_heads} * c.head_dim),
        ffn(c.intermediate_size) {}
  int64_t hidden, q_rows, kv_rows, ffn;
};

absl::Status MapLayer(Resolver& r, const LayerTensorNames& ln, int i, const LayerShapes& s,
                      bool qkv_bias, LayerWeights* l) {
  const std::string p = absl::StrCat(ln.prefix, i);
  DLLM_RETURN_IF_ERROR(r.Get(p + ln.attn_norm, {s.hidden}, &l->attn_norm));
  DLLM_RETURN_IF_ERROR(r.Get(p + ln.q, {s.q_rows, s.hidden}, &l->q));
  DLLM_RETURN_IF_ERROR(r.Get(p + ln.k, {s.kv_rows, s.hidden}, &l->k));
  DLLM_RETURN_IF_ERROR(r.Get(p + ln.v, {s.kv_rows, s.hidden}, &l->v));
  if (qkv_bias) {
    l->q_bias.emplace();
    l->k_bias.emplace();
    l->v_bias.emplace();
    DLLM_RETURN_IF_ERROR(r.Get(p + ln.q_bias, {s.q_rows}, &*l->q_bias));
    DLLM_RETURN_IF_ERROR(r.Get(p + ln.k_bias, {s.kv_rows}, &*l->k_bias));
    DLLM_RETURN_IF_ERROR(r.Get(p + ln.v_bias, {s.kv_rows}, &*l->v_bias));
  }
  DLLM_RETURN_IF_ERROR(r.Get(p + ln.o, {s.hidden, s.q_rows}, &l->o));
  DLLM_RETURN_IF_ERROR(r.Get(p + ln.ffn_norm, {s.hidden}, &l->ffn_norm));
  DLLM_RETURN_IF_ERROR(r.Get(p + ln.gate, {s.ffn, s.hidden}, &l->gate));
  DLLM_RETURN_IF_ERROR(r.Get(p + ln.up, {s.ffn, s.hidden}, &l->up));
  return r.Get(p + ln.down, {s.hidden, s.ffn}, &l->down);
}

// Tensors the config does not account for, which would otherwise be silently dropped.
absl::Status CheckNoExtraTensors(const Checkpoint& checkpoint, const ModelConfig& config,
                                 const LayerTensorNames& ln) {
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
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ModelWeights> MapModelWeights(const Checkpoint& checkpoint,
                                             const ModelConfig& config) {
  if (config.num_layers <= 0 || config.hidden_size <= 0 || config.num_heads <= 0 ||
      config.num_kv_heads <= 0 || config.head_dim <= 0 || config.intermediate_size <= 0 ||
      config.vocab_size <= 0) {
    return absl::InvalidArgumentError("MapModelWeights: config has non-positive sizes");
  }
  const ModelFamilyInfo& names = FamilyInfo(config.family);
  const int64_t hidden = config.hidden_size;
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
  DLLM_RETURN_IF_ERROR(CheckLastLayer(checkpoint, config, names));
  // The vector grows only as layers resolve (see CheckLastLayer).
  const LayerShapes shapes(config);
  for (int i = 0; i < config.num_layers; ++i) {
    DLLM_RETURN_IF_ERROR(
        MapLayer(r, names.layer, i, shapes, config.qkv_bias, &w.layers.emplace_back()));
  }
  DLLM_RETURN_IF_ERROR(CheckNoExtraTensors(checkpoint, config, names.layer));
  return w;
}

}  // namespace dllm
