#include "engine/model/transformer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/backend/backend.h"
#include "engine/core/status_macros.h"
#include "engine/kv/kv_pool.h"
#include "engine/model/forward_inspection.h"
#include "engine/model/forward_plan.h"

namespace dllm {
namespace {

// Predicted rows go through the final norm, LM head and statistics this many at a time, which
// bounds the logits buffer to kLogitsChunkRows * vocab floats.
constexpr int kLogitsChunkRows = 64;

struct DeviceLayer {
  std::unique_ptr<DeviceBuffer> attn_norm, q, k, v, q_bias, k_bias, v_bias, o;
  std::unique_ptr<DeviceBuffer> ffn_norm, gate, up, down;
};

using Logits = std::vector<std::vector<std::vector<float>>>;

class TransformerImpl final : public Transformer {
 public:
  TransformerImpl(const ModelConfig& config, Backend* backend)
      : config_(config), backend_(backend) {}

  absl::Status Upload(const ModelWeights& weights);

  absl::Status Forward(const StepBatch& batch, StepResult* result) override {
    return Run(batch, config_.shift_logits, result, nullptr);
  }

  const ModelConfig& config() const override { return config_; }
  bool computes_attention_maps() const override {
    return backend_->computes_attention_probabilities();
  }

  // `logits`, when set, gets the rows of every sequence, or of sequence `capture` only
  // (the other sequences' entries stay empty) when capture >= 0.
  absl::Status Run(const StepBatch& batch, bool shift_logits, StepResult* result, Logits* logits,
                   int capture = -1);

  Backend* backend() const { return backend_; }

 private:
  struct Wanted {
    int sequence;  // index in the batch
    int index;     // index in its predict_positions
  };
  struct StepRun;
  // An extra that some sequences of a step ask for, run at fixed points of the forward
  // instead of branching in it: hidden-state stash (elastic), attention maps (d2cache,
  // elastic), logits capture (shadow steps, debugging). AddHooks builds the step's list.
  class ForwardHook {
   public:
    virtual ~ForwardHook() = default;
    // Before layer l's attention norm; h_ holds the layer's input residual of every row.
    virtual absl::Status BeforeLayer(const StepRun&, int) { return absl::OkStatus(); }
    // After layer l's query side over every row (never after a pruned last layer); q_ holds
    // the layer's queries.
    virtual absl::Status AfterQuerySide(const StepRun&, int) { return absl::OkStatus(); }
    // After the statistics of the chunk's row `chunk_row` (logits_ holds its logits).
    virtual absl::Status OnLogitsRow(int, int, int) { return absl::OkStatus(); }
    // Whether the last layer must run its query side on every row.
    virtual bool NeedsEveryRowAtLastLayer() const { return false; }
  };
  // What the stages of one Run share. Built and used on the calling thread only.
  struct StepRun {
    StepRun(const StepBatch& b, const ForwardPlan& p, const ModelConfig& c, int first)
        : batch(b), plan(p), rows(p.total_rows), first_layer(first) {
      shape.num_heads = c.num_heads;
      shape.num_kv_heads = c.num_kv_heads;
      shape.head_dim = c.head_dim;
      shape.num_layers = c.num_layers;
      shape.scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
    }
    const StepBatch& batch;
    const ForwardPlan& plan;
    int rows;         // computed rows of the whole batch
    int first_layer;  // > 0: one sequence resuming from its stored hidden states
    std::vector<int32_t> host_positions;  // of every computed row
    std::vector<AttentionSequence> attn;  // the sequences with computed rows
    std::vector<int> attn_index;          // per sequence: its index in attn, or -1
    std::vector<Wanted> wanted;           // the predicting rows, grouped by sequence
    std::vector<int32_t> wanted_rows;     // their batch rows
    std::vector<LogitsRowRequest> requests;
    // The last layer's query side runs on the predicting rows alone (see PrunedLastLayer).
    bool prune_last_layer = false;
    std::vector<AttentionSequence> pred_attn;
    AttentionShape shape;
    std::vector<std::unique_ptr<ForwardHook>> hooks;
  };
  class HiddenStateStash;
  class AttentionMapsCapture;
  class LogitsCapture;

  // The stages of Run, in order.
  absl::StatusOr<int> FirstLayer(const StepBatch& batch) const;
  absl::Status UploadInputs(StepRun* run);
  void CollectPredictions(StepRun* run) const;
  void AddHooks(Logits* logits, int capture, StepRun* run);
  // Every layer writes the K/V of every row, but only the predicting rows' outputs of the
  // last layer are ever read (by the LM head), so the last layer runs its query side (Q,
  // attention, O, FFN) on those rows alone. Every kernel is row-independent (the backend's
  // batch-invariance contract), so this changes no bit of the predicted rows; it saves most
  // of a layer of a full step. A hook may need every row (attention maps).
  absl::Status PrunedLastLayer(StepRun* run);
  absl::Status FirstLayerInput(const StepRun& run);
  absl::Status Layer(int l, StepRun* run);
  // Final norm, LM head and statistics on the predicting rows, in chunks.
  absl::Status PredictRows(StepRun* run, StepResult* result);
  // The slab rows (hidden_size wide) of sequence i's stored input hidden states at layer l.
  std::vector<int32_t> HiddenSlabRows(const StepRun& run, size_t i, int l) const;

  // A vector (cols == 0: `rows` elements) or a Gemm matrix [rows, cols] (UploadMatrix). A
  // checkpoint tensor is read into `*staging` first (one buffer reused for every tensor, so
  // the load holds at most the largest tensor besides the backend's copy).
  absl::StatusOr<std::unique_ptr<DeviceBuffer>> UploadTensor(const TensorView& t, int64_t rows,
                                                             int64_t cols,
                                                             std::vector<uint8_t>* staging);
  absl::Status EnsureRows(int rows);
  absl::Status EnsurePredictRows(int rows);
  // One layer in two halves. KeysValues: K/V of the `rows` rows of a_ (the attention-normed
  // residual) at positions_, written into the slabs. QuerySide: from the `rows` rows of a_ and
  // their residual `h` (updated in place): Q, RoPE at `positions`, attention over the slabs,
  // output projection and MLP. Every kernel is row-independent (the backend's
  // batch-invariance contract), so QuerySide may run on any subset of the rows.
  absl::Status KeysValues(const DeviceLayer& w, int rows, std::span<const AttentionSequence> attn,
                          const AttentionShape& shape);
  absl::Status QuerySide(const DeviceLayer& w, int rows, const DeviceBuffer& positions,
                         std::span<const AttentionSequence> attn, const AttentionShape& shape,
                         DeviceBuffer* h);

  int q_width() const { return config_.num_heads * config_.head_dim; }
  int kv_width() const { return config_.num_kv_heads * config_.head_dim; }
  RopeMode rope_mode() const {
    return config_.rope_in_bf16 ? RopeMode::kBf16Rounded : RopeMode::kFp32;
  }

  ModelConfig config_;
  Backend* backend_;
  std::unique_ptr<DeviceBuffer> embed_, final_norm_, lm_head_owned_;
  const DeviceBuffer* lm_head_ = nullptr;  // lm_head_owned_ or embed_ (tied)
  std::vector<DeviceLayer> layers_;

  // Workspace, grown on demand and kept between steps.
  int row_capacity_ = 0;
  std::unique_ptr<DeviceBuffer> h_, a_, q_, k_, v_, att_, gate_, up_, tokens_, positions_;
  // The last layer on the predicting rows only (see Run): their residual rows, batch row
  // indices and positions.
  std::unique_ptr<DeviceBuffer> h_pred_, pred_rows_, pred_positions_;
  std::unique_ptr<DeviceBuffer> hidden_rows_;  // slab row indices of stored hidden states
  int predict_capacity_ = 0;
  std::unique_ptr<DeviceBuffer> gather_, hs_, logits_;
};

absl::StatusOr<std::unique_ptr<DeviceBuffer>> TransformerImpl::UploadTensor(
    const TensorView& t, int64_t rows, int64_t cols, std::vector<uint8_t>* staging) {
  const int64_t expected_elements = cols == 0 ? rows : rows * cols;
  auto bytes = t.ReadBytes(staging);
  if (!bytes.ok()) return bytes.status();
  const int64_t elements = static_cast<int64_t>(bytes->size()) / DTypeSize(t.dtype);
  if (elements != expected_elements) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tensor ", t.name, ": expected ", expected_elements, " elements, found ", elements));
  }
  auto buffer = cols == 0 ? backend_->UploadWeights(t.dtype, *bytes, elements)
                          : backend_->UploadMatrix(t.dtype, *bytes, rows, cols);
  if (!buffer.ok()) {
    return absl::Status(buffer.status().code(),
                        absl::StrCat("uploading ", t.name, ": ", buffer.status().message()));
  }
  return buffer;
}

absl::Status TransformerImpl::Upload(const ModelWeights& weights) {
  const ModelConfig& c = config_;
  const int64_t hidden = c.hidden_size;
  if (static_cast<int>(weights.layers.size()) != c.num_layers) {
    return absl::InvalidArgumentError(absl::StrCat("weights have ", weights.layers.size(),
                                                   " layers, config says ", c.num_layers));
  }
  // mat: matrices that Gemm reads as [out, in]; up: vectors (norm weights, biases).
  std::vector<uint8_t> staging;  // released when the upload ends
  auto mat = [&](const TensorView& t, int64_t rows, int64_t cols,
                 std::unique_ptr<DeviceBuffer>* out) {
    auto b = UploadTensor(t, rows, cols, &staging);
    if (!b.ok()) return b.status();
    *out = std::move(*b);
    return absl::OkStatus();
  };
  auto up = [&](const TensorView& t, int64_t n, std::unique_ptr<DeviceBuffer>* out) {
    return mat(t, n, 0, out);
  };
  const bool tied = weights.lm_head.SameBytesAs(weights.embed);
  // A tied table is also the LM head's Gemm weight; an untied one is only gathered by row.
  if (tied) {
    DLLM_RETURN_IF_ERROR(mat(weights.embed, c.vocab_size, hidden, &embed_));
  } else {
    DLLM_RETURN_IF_ERROR(up(weights.embed, int64_t{c.vocab_size} * hidden, &embed_));
  }
  DLLM_RETURN_IF_ERROR(up(weights.final_norm, hidden, &final_norm_));
  if (tied) {
    lm_head_ = embed_.get();  // tied embeddings: one copy
  } else {
    DLLM_RETURN_IF_ERROR(mat(weights.lm_head, c.vocab_size, hidden, &lm_head_owned_));
    lm_head_ = lm_head_owned_.get();
  }
  layers_.resize(c.num_layers);
  for (int l = 0; l < c.num_layers; ++l) {
    const LayerWeights& w = weights.layers[l];
    DeviceLayer& d = layers_[l];
    DLLM_RETURN_IF_ERROR(up(w.attn_norm, hidden, &d.attn_norm));
    DLLM_RETURN_IF_ERROR(mat(w.q, q_width(), hidden, &d.q));
    DLLM_RETURN_IF_ERROR(mat(w.k, kv_width(), hidden, &d.k));
    DLLM_RETURN_IF_ERROR(mat(w.v, kv_width(), hidden, &d.v));
    if (c.qkv_bias) {
      if (!w.q_bias || !w.k_bias || !w.v_bias) {
        return absl::InvalidArgumentError(
            absl::StrCat("layer ", l, ": config has qkv_bias but a q/k/v bias is missing"));
      }
      DLLM_RETURN_IF_ERROR(up(*w.q_bias, q_width(), &d.q_bias));
      DLLM_RETURN_IF_ERROR(up(*w.k_bias, kv_width(), &d.k_bias));
      DLLM_RETURN_IF_ERROR(up(*w.v_bias, kv_width(), &d.v_bias));
    }
    DLLM_RETURN_IF_ERROR(mat(w.o, hidden, q_width(), &d.o));
    DLLM_RETURN_IF_ERROR(up(w.ffn_norm, hidden, &d.ffn_norm));
    DLLM_RETURN_IF_ERROR(mat(w.gate, c.intermediate_size, hidden, &d.gate));
    DLLM_RETURN_IF_ERROR(mat(w.up, c.intermediate_size, hidden, &d.up));
    DLLM_RETURN_IF_ERROR(mat(w.down, hidden, c.intermediate_size, &d.down));
  }
  return absl::OkStatus();
}

absl::Status TransformerImpl::EnsureRows(int rows) {
  if (rows <= row_capacity_) return absl::OkStatus();
  const int cap = std::max({rows, row_capacity_ + row_capacity_ / 2, 16});
  const int act = backend_->activation_bytes_per_element();
  auto alloc = [&](int64_t elements, int bytes_per, std::unique_ptr<DeviceBuffer>* out) {
    auto b = backend_->Allocate(elements * bytes_per);
    if (!b.ok()) return b.status();
    *out = std::move(*b);
    return absl::OkStatus();
  };
  const int64_t r = cap;
  DLLM_RETURN_IF_ERROR(alloc(r * config_.hidden_size, act, &h_));
  DLLM_RETURN_IF_ERROR(alloc(r * config_.hidden_size, act, &a_));
  DLLM_RETURN_IF_ERROR(alloc(r * q_width(), act, &q_));
  DLLM_RETURN_IF_ERROR(alloc(r * kv_width(), act, &k_));
  DLLM_RETURN_IF_ERROR(alloc(r * kv_width(), act, &v_));
  DLLM_RETURN_IF_ERROR(alloc(r * q_width(), act, &att_));
  DLLM_RETURN_IF_ERROR(alloc(r * config_.intermediate_size, act, &gate_));
  DLLM_RETURN_IF_ERROR(alloc(r * config_.intermediate_size, act, &up_));
  DLLM_RETURN_IF_ERROR(alloc(r, 4, &tokens_));
  DLLM_RETURN_IF_ERROR(alloc(r, 4, &positions_));
  DLLM_RETURN_IF_ERROR(alloc(r * config_.hidden_size, act, &h_pred_));
  DLLM_RETURN_IF_ERROR(alloc(r, 4, &pred_rows_));
  DLLM_RETURN_IF_ERROR(alloc(r, 4, &pred_positions_));
  DLLM_RETURN_IF_ERROR(alloc(r, 4, &hidden_rows_));
  row_capacity_ = cap;
  return absl::OkStatus();
}

absl::Status TransformerImpl::EnsurePredictRows(int rows) {
  if (rows <= predict_capacity_) return absl::OkStatus();
  const int act = backend_->activation_bytes_per_element();
  const int64_t r = rows;
  auto gather = backend_->Allocate(r * 4);
  if (!gather.ok()) return gather.status();
  auto hs = backend_->Allocate(r * config_.hidden_size * act);
  if (!hs.ok()) return hs.status();
  auto logits = backend_->Allocate(r * config_.vocab_size * act);
  if (!logits.ok()) return logits.status();
  gather_ = std::move(*gather);
  hs_ = std::move(*hs);
  logits_ = std::move(*logits);
  predict_capacity_ = rows;
  return absl::OkStatus();
}

absl::Status TransformerImpl::KeysValues(const DeviceLayer& w, int rows,
                                         std::span<const AttentionSequence> attn,
                                         const AttentionShape& shape) {
  const ModelConfig& c = config_;
  const int hidden = c.hidden_size;
  DLLM_RETURN_IF_ERROR(
      backend_->Gemm(*a_, rows, hidden, *w.k, kv_width(), w.k_bias.get(), false, k_.get()));
  DLLM_RETURN_IF_ERROR(
      backend_->Gemm(*a_, rows, hidden, *w.v, kv_width(), w.v_bias.get(), false, v_.get()));
  DLLM_RETURN_IF_ERROR(backend_->Rope(k_.get(), rows, c.num_kv_heads, c.head_dim, *positions_,
                                      c.rope_theta, rope_mode()));
  return backend_->KvScatter(*k_, *v_, *positions_, attn, shape);
}

absl::Status TransformerImpl::QuerySide(const DeviceLayer& w, int rows,
                                        const DeviceBuffer& positions,
                                        std::span<const AttentionSequence> attn,
                                        const AttentionShape& shape, DeviceBuffer* h) {
  const ModelConfig& c = config_;
  const int hidden = c.hidden_size;
  DLLM_RETURN_IF_ERROR(
      backend_->Gemm(*a_, rows, hidden, *w.q, q_width(), w.q_bias.get(), false, q_.get()));
  DLLM_RETURN_IF_ERROR(backend_->Rope(q_.get(), rows, c.num_heads, c.head_dim, positions,
                                      c.rope_theta, rope_mode()));
  DLLM_RETURN_IF_ERROR(backend_->Attention(*q_, attn, shape, att_.get()));
  DLLM_RETURN_IF_ERROR(backend_->Gemm(*att_, rows, q_width(), *w.o, hidden, nullptr, true, h));
  DLLM_RETURN_IF_ERROR(backend_->RmsNorm(*h, rows, hidden, *w.ffn_norm, c.norm_eps, a_.get()));
  DLLM_RETURN_IF_ERROR(
      backend_->Gemm(*a_, rows, hidden, *w.gate, c.intermediate_size, nullptr, false, gate_.get()));
  DLLM_RETURN_IF_ERROR(
      backend_->Gemm(*a_, rows, hidden, *w.up, c.intermediate_size, nullptr, false, up_.get()));
  DLLM_RETURN_IF_ERROR(
      backend_->SwiGlu(*gate_, *up_, int64_t{rows} * c.intermediate_size, gate_.get()));
  return backend_->Gemm(*gate_, rows, c.intermediate_size, *w.down, hidden, nullptr, true, h);
}

absl::StatusOr<int> TransformerImpl::FirstLayer(const StepBatch& batch) const {
  int first_layer = 0;
  for (const SequenceStep& s : batch.sequences) {
    if (s.first_layer < 0 || s.first_layer >= config_.num_layers) {
      return absl::InvalidArgumentError(
          absl::StrCat("first_layer ", s.first_layer, " outside [0, ", config_.num_layers, ")"));
    }
    if ((s.first_layer > 0 || s.store_hidden_states) &&
        (s.kv == nullptr || !s.kv->has_hidden_states())) {
      return absl::InvalidArgumentError(
          "a step that stores or starts from hidden states needs a slab with hidden states");
    }
    first_layer = std::max(first_layer, s.first_layer);
  }
  if (first_layer > 0 && batch.sequences.size() != 1) {
    return absl::InvalidArgumentError("a step with first_layer > 0 must be alone in its batch");
  }
  return first_layer;
}

std::vector<int32_t> TransformerImpl::HiddenSlabRows(const StepRun& run, size_t i, int l) const {
  const SequenceStep& s = run.batch.sequences[i];
  const int cap = s.kv->capacity_positions();
  const int64_t base = config_.kv_layout().HiddenRowBase(cap) + int64_t{l} * cap;
  std::vector<int32_t> out;
  out.reserve(run.plan.sequences[i].positions.size());
  for (int32_t pos : run.plan.sequences[i].positions) {
    out.push_back(static_cast<int32_t>(base + pos));
  }
  return out;
}

absl::Status TransformerImpl::UploadInputs(StepRun* run) {
  DLLM_RETURN_IF_ERROR(EnsureRows(run->rows));
  std::vector<int32_t> host_tokens;
  host_tokens.reserve(run->rows);
  run->host_positions.reserve(run->rows);
  run->attn.reserve(run->batch.sequences.size());
  for (size_t i = 0; i < run->batch.sequences.size(); ++i) {
    const SequenceStep& s = run->batch.sequences[i];
    const SequencePlan& p = run->plan.sequences[i];
    run->attn_index.push_back(p.positions.empty() ? -1 : static_cast<int>(run->attn.size()));
    if (p.positions.empty()) continue;
    for (int32_t pos : p.positions) {
      host_tokens.push_back(s.tokens[pos]);
      run->host_positions.push_back(pos);
    }
    AttentionSequence a;
    a.kv = &s.kv->buffer();
    a.capacity_positions = s.kv->capacity_positions();
    a.kv_positions = static_cast<int>(s.tokens.size());
    a.row_begin = p.row_begin;
    a.rows = static_cast<int>(p.positions.size());
    run->attn.push_back(a);
  }
  DLLM_RETURN_IF_ERROR(backend_->UploadInt32(host_tokens, tokens_.get()));
  return backend_->UploadInt32(run->host_positions, positions_.get());
}

void TransformerImpl::CollectPredictions(StepRun* run) const {
  run->wanted.reserve(run->plan.total_predictions);
  for (size_t i = 0; i < run->batch.sequences.size(); ++i) {
    const SequenceStep& s = run->batch.sequences[i];
    for (size_t j = 0; j < s.predict_positions.size(); ++j) {
      run->wanted.push_back({static_cast<int>(i), static_cast<int>(j)});
      run->wanted_rows.push_back(run->plan.sequences[i].predict_rows[j]);
      LogitsRowRequest r;
      r.position = s.predict_positions[j];
      r.step = s.step;
      r.sampling = s.sampling;
      run->requests.push_back(r);
    }
  }
}

// Stores each layer's input hidden states of the sequences that ask for them
// (SequenceStep::store_hidden_states: elastic's deep-layer recompute starts from them).
class TransformerImpl::HiddenStateStash final : public ForwardHook {
 public:
  explicit HiddenStateStash(TransformerImpl* t) : t_(t) {}
  absl::Status BeforeLayer(const StepRun& run, int l) override {
    for (size_t i = 0; i < run.batch.sequences.size(); ++i) {
      const SequenceStep& s = run.batch.sequences[i];
      if (!s.store_hidden_states || run.plan.sequences[i].positions.empty()) continue;
      const std::vector<int32_t> slab_rows = t_->HiddenSlabRows(run, i, l);
      DLLM_RETURN_IF_ERROR(t_->backend_->UploadInt32(slab_rows, t_->hidden_rows_.get()));
      DLLM_RETURN_IF_ERROR(t_->backend_->ScatterRows(
          *t_->h_, run.plan.sequences[i].row_begin, t_->config_.hidden_size, *t_->hidden_rows_,
          static_cast<int>(slab_rows.size()), &s.kv->buffer()));
    }
    return absl::OkStatus();
  }

 private:
  TransformerImpl* t_;
};

// Fills SequenceStep::attention_maps (d2cache and elastic decide from them) for each layer:
// inside the layer's attention pass where the backend fuses them (the pass writes the layer's
// slice of the maps through AttentionSequence::probs and times that work), else after the
// layer's query side, from the queries in q_ and the keys in the slabs.
class TransformerImpl::AttentionMapsCapture final : public ForwardHook {
 public:
  AttentionMapsCapture(TransformerImpl* t, std::vector<std::pair<AttentionMaps*, int>> maps,
                       StepRun* run)
      : t_(t), maps_(std::move(maps)), fused_(t->backend_->fuses_attention_probabilities()) {
    if (!fused_) return;
    outs_.resize(maps_.size());
    for (size_t i = 0; i < maps_.size(); ++i) run->attn[maps_[i].second].probs = &outs_[i];
  }
  bool NeedsEveryRowAtLastLayer() const override { return true; }
  absl::Status BeforeLayer(const StepRun&, int l) override {
    for (size_t i = 0; fused_ && i < maps_.size(); ++i) outs_[i].values = maps_[i].first->Layer(l);
    return absl::OkStatus();
  }
  absl::Status AfterQuerySide(const StepRun& run, int l) override {
    if (fused_) {
      for (size_t i = 0; i < maps_.size(); ++i) {
        maps_[i].first->seconds += outs_[i].seconds;
        outs_[i].seconds = 0;
      }
      return absl::OkStatus();
    }
    // The clock starts after the layer's queued work (asynchronous backends), so the maps'
    // time is theirs alone.
    DLLM_RETURN_IF_ERROR(t_->backend_->Synchronize());
    for (auto& [m, a] : maps_) {
      const auto start = std::chrono::steady_clock::now();
      DLLM_RETURN_IF_ERROR(
          t_->backend_->AttentionProbabilities(*t_->q_, run.attn[a], run.shape, m->Layer(l)));
      m->seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    }
    return absl::OkStatus();
  }

 private:
  TransformerImpl* t_;
  std::vector<std::pair<AttentionMaps*, int>> maps_;  // a sequence's maps, its index in attn
  bool fused_;
  std::vector<AttentionProbsOut> outs_;  // fused: per maps_ entry, what run.attn points at
};

// Copies the logits rows of every sequence, or of sequence `capture` only, for the shadow
// steps and the debugging entry points (Logits: [sequence][prediction][vocab]).
class TransformerImpl::LogitsCapture final : public ForwardHook {
 public:
  LogitsCapture(TransformerImpl* t, const StepRun& run, Logits* logits, int capture)
      : t_(t), logits_(logits), capture_(capture) {
    for (size_t i = 0; i < run.batch.sequences.size(); ++i) {
      if (Wants(static_cast<int>(i))) {
        (*logits_)[i].resize(run.batch.sequences[i].predict_positions.size());
      }
    }
  }
  absl::Status OnLogitsRow(int sequence, int index, int chunk_row) override {
    if (!Wants(sequence)) return absl::OkStatus();
    const int vocab = t_->config_.vocab_size;
    std::vector<float>& row = (*logits_)[sequence][index];
    row.resize(vocab);
    return t_->backend_->DownloadFloats(*t_->logits_, int64_t{chunk_row} * vocab,
                                        std::span<float>(row));
  }

 private:
  bool Wants(int sequence) const { return capture_ < 0 || capture_ == sequence; }
  TransformerImpl* t_;
  Logits* logits_;
  int capture_;
};

void TransformerImpl::AddHooks(Logits* logits, int capture, StepRun* run) {
  bool stash = false;
  std::vector<std::pair<AttentionMaps*, int>> maps;
  for (size_t i = 0; i < run->batch.sequences.size(); ++i) {
    const SequenceStep& s = run->batch.sequences[i];
    const SequencePlan& p = run->plan.sequences[i];
    stash |= s.store_hidden_states;
    if (s.attention_maps == nullptr) continue;
    s.attention_maps->Reset(p.positions.empty() ? 0 : config_.num_layers,
                            static_cast<int>(p.positions.size()),
                            static_cast<int>(s.tokens.size()));
    if (!p.positions.empty()) maps.emplace_back(s.attention_maps, run->attn_index[i]);
  }
  if (stash) run->hooks.push_back(std::make_unique<HiddenStateStash>(this));
  if (!maps.empty()) {
    run->hooks.push_back(std::make_unique<AttentionMapsCapture>(this, std::move(maps), run));
  }
  if (logits != nullptr) {
    run->hooks.push_back(std::make_unique<LogitsCapture>(this, *run, logits, capture));
  }
}

absl::Status TransformerImpl::PrunedLastLayer(StepRun* run) {
  const int total = static_cast<int>(run->wanted.size());
  bool every_row = false;
  for (const auto& hook : run->hooks) every_row |= hook->NeedsEveryRowAtLastLayer();
  run->prune_last_layer = total > 0 && total < run->rows && !every_row;
  if (!run->prune_last_layer) return absl::OkStatus();
  std::vector<int32_t> pred_positions;
  pred_positions.reserve(total);
  for (int32_t row : run->wanted_rows) pred_positions.push_back(run->host_positions[row]);
  DLLM_RETURN_IF_ERROR(backend_->UploadInt32(run->wanted_rows, pred_rows_.get()));
  DLLM_RETURN_IF_ERROR(backend_->UploadInt32(pred_positions, pred_positions_.get()));
  // Predicting rows are grouped by sequence in `wanted`, so each sequence's are contiguous.
  int begin = 0;
  for (size_t i = 0; i < run->batch.sequences.size(); ++i) {
    if (run->attn_index[i] < 0) continue;
    AttentionSequence seq = run->attn[run->attn_index[i]];
    seq.probs = nullptr;  // the maps need every row: a run that wants them is never pruned
    seq.row_begin = begin;
    seq.rows = static_cast<int>(run->batch.sequences[i].predict_positions.size());
    begin += seq.rows;
    if (seq.rows > 0) run->pred_attn.push_back(seq);
  }
  return absl::OkStatus();
}

absl::Status TransformerImpl::FirstLayerInput(const StepRun& run) {
  const int hidden = config_.hidden_size;
  if (run.first_layer == 0) {
    return backend_->EmbeddingGather(*embed_, config_.vocab_size, hidden, *tokens_, run.rows,
                                     h_.get());
  }
  // One sequence (FirstLayer checked it): its rows are rows [0, rows).
  DLLM_RETURN_IF_ERROR(
      backend_->UploadInt32(HiddenSlabRows(run, 0, run.first_layer), hidden_rows_.get()));
  return backend_->GatherRows(run.batch.sequences[0].kv->buffer(), hidden, *hidden_rows_, run.rows,
                              h_.get());
}

absl::Status TransformerImpl::Layer(int l, StepRun* run) {
  const ModelConfig& c = config_;
  const DeviceLayer& w = layers_[l];
  const int hidden = c.hidden_size;
  run->shape.layer = l;
  for (const auto& hook : run->hooks) DLLM_RETURN_IF_ERROR(hook->BeforeLayer(*run, l));
  DLLM_RETURN_IF_ERROR(
      backend_->RmsNorm(*h_, run->rows, hidden, *w.attn_norm, c.norm_eps, a_.get()));
  DLLM_RETURN_IF_ERROR(KeysValues(w, run->rows, run->attn, run->shape));
  if (run->prune_last_layer && l == c.num_layers - 1) {
    // The predicting rows' residuals move to h_pred_; the norm is per row, so a_'s first
    // `total` rows then equal those rows of the norm above.
    const int total = static_cast<int>(run->wanted.size());
    DLLM_RETURN_IF_ERROR(backend_->GatherRows(*h_, hidden, *pred_rows_, total, h_pred_.get()));
    DLLM_RETURN_IF_ERROR(
        backend_->RmsNorm(*h_pred_, total, hidden, *w.attn_norm, c.norm_eps, a_.get()));
    return QuerySide(w, total, *pred_positions_, run->pred_attn, run->shape, h_pred_.get());
  }
  DLLM_RETURN_IF_ERROR(QuerySide(w, run->rows, *positions_, run->attn, run->shape, h_.get()));
  // q_ still holds this layer's (RoPE'd) queries and the slabs its keys.
  for (const auto& hook : run->hooks) DLLM_RETURN_IF_ERROR(hook->AfterQuerySide(*run, l));
  return absl::OkStatus();
}

absl::Status TransformerImpl::PredictRows(StepRun* run, StepResult* result) {
  const ModelConfig& c = config_;
  const int hidden = c.hidden_size;
  const int total = static_cast<int>(run->wanted.size());
  if (total == 0) return absl::OkStatus();
  const DeviceBuffer& final_h = run->prune_last_layer ? *h_pred_ : *h_;
  std::vector<int32_t>& rows = run->wanted_rows;
  if (run->prune_last_layer) std::iota(rows.begin(), rows.end(), 0);
  DLLM_RETURN_IF_ERROR(EnsurePredictRows(std::min(total, kLogitsChunkRows)));
  std::vector<RowStats> stats(kLogitsChunkRows);
  for (int begin = 0; begin < total; begin += kLogitsChunkRows) {
    const int n = std::min(kLogitsChunkRows, total - begin);
    DLLM_RETURN_IF_ERROR(
        backend_->UploadInt32(std::span<const int32_t>(rows.data() + begin, n), gather_.get()));
    DLLM_RETURN_IF_ERROR(backend_->GatherRows(final_h, hidden, *gather_, n, hs_.get()));
    DLLM_RETURN_IF_ERROR(backend_->RmsNorm(*hs_, n, hidden, *final_norm_, c.norm_eps, hs_.get()));
    DLLM_RETURN_IF_ERROR(
        backend_->Gemm(*hs_, n, hidden, *lm_head_, c.vocab_size, nullptr, false, logits_.get()));
    DLLM_RETURN_IF_ERROR(backend_->LogitsStats(
        *logits_, c.vocab_size, std::span<const LogitsRowRequest>(run->requests.data() + begin, n),
        std::span<RowStats>(stats.data(), n)));
    for (int t = 0; t < n; ++t) {
      const Wanted& w = run->wanted[begin + t];
      (*result)[w.sequence][w.index] = stats[t];
      for (const auto& hook : run->hooks) {
        DLLM_RETURN_IF_ERROR(hook->OnLogitsRow(w.sequence, w.index, t));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status TransformerImpl::Run(const StepBatch& batch, bool shift_logits, StepResult* result,
                                  Logits* logits, int capture) {
  DLLM_ASSIGN_OR_RETURN(plan, PlanForward(batch, config_, shift_logits));
  DLLM_ASSIGN_OR_RETURN(first_layer, FirstLayer(batch));
  result->assign(batch.sequences.size(), {});
  if (logits != nullptr) logits->assign(batch.sequences.size(), {});
  for (size_t i = 0; i < batch.sequences.size(); ++i) {
    (*result)[i].resize(batch.sequences[i].predict_positions.size());
  }
  if (plan.total_rows == 0) return absl::OkStatus();

  // Stages: inputs (token ids and absolute positions of every computed row), the predicting
  // rows (the only rows whose final hidden state is used), the extras the sequences asked for
  // (hooks), the layers over the query rows of all sequences together, then the final norm,
  // LM head and statistics on the predicting rows.
  StepRun run(batch, plan, config_, first_layer);
  DLLM_RETURN_IF_ERROR(UploadInputs(&run));
  CollectPredictions(&run);
  AddHooks(logits, capture, &run);
  DLLM_RETURN_IF_ERROR(PrunedLastLayer(&run));
  DLLM_RETURN_IF_ERROR(FirstLayerInput(run));
  for (int l = first_layer; l < config_.num_layers; ++l) DLLM_RETURN_IF_ERROR(Layer(l, &run));
  return PredictRows(&run, result);
}

absl::Status ValidateConfig(const ModelConfig& c) {
  if (c.hidden_size <= 0 || c.num_layers <= 0 || c.num_heads <= 0 || c.num_kv_heads <= 0 ||
      c.head_dim <= 0 || c.intermediate_size <= 0 || c.vocab_size <= 0) {
    return absl::InvalidArgumentError("model config: sizes must be positive");
  }
  if (c.num_heads % c.num_kv_heads != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model config: ", c.num_kv_heads, " kv heads do not divide ", c.num_heads, " heads"));
  }
  if (c.head_dim % 2 != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("model config: head_dim ", c.head_dim, " must be even for RoPE"));
  }
  if (!(c.rope_theta > 0.0f) || !(c.norm_eps > 0.0f)) {
    return absl::InvalidArgumentError("model config: rope_theta and norm_eps must be positive");
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<Transformer>> Transformer::Create(const ModelConfig& config,
                                                                 const ModelWeights& weights,
                                                                 Backend* backend) {
  if (backend == nullptr) return absl::InvalidArgumentError("Transformer::Create: no backend");
  DLLM_RETURN_IF_ERROR(ValidateConfig(config));
  auto t = std::make_unique<TransformerImpl>(config, backend);
  DLLM_RETURN_IF_ERROR(t->Upload(weights));
  return std::unique_ptr<Transformer>(std::move(t));
}

absl::Status ForwardWithLogits(Transformer& transformer, const StepBatch& batch,
                               DebugLogitsRows mode, StepResult* result, Logits* logits,
                               int capture) {
  auto* impl = dynamic_cast<TransformerImpl*>(&transformer);
  if (impl == nullptr) {
    return absl::UnimplementedError("ForwardWithLogits needs a Transformer::Create transformer");
  }
  if (capture >= static_cast<int>(batch.sequences.size())) {
    return absl::InvalidArgumentError(
        absl::StrCat("capture index ", capture, " outside the batch"));
  }
  const bool shift = mode == DebugLogitsRows::kPredicted && transformer.config().shift_logits;
  return impl->Run(batch, shift, result, logits, capture);
}

absl::StatusOr<KvSquaredDiffs> CompareKvSlabs(Transformer& transformer, KvSlab& a, KvSlab& b,
                                              int positions) {
  auto* impl = dynamic_cast<TransformerImpl*>(&transformer);
  if (impl == nullptr) {
    return absl::UnimplementedError("CompareKvSlabs needs a Transformer::Create transformer");
  }
  if (positions < 0 || positions > a.capacity_positions() || positions > b.capacity_positions()) {
    return absl::InvalidArgumentError(
        absl::StrCat("CompareKvSlabs: ", positions, " positions do not fit the slabs"));
  }
  const ModelConfig& c = transformer.config();
  const int64_t width = int64_t{c.num_kv_heads} * c.head_dim;
  KvSquaredDiffs out;
  out.layers = c.num_layers;
  out.positions = positions;
  const size_t cells = static_cast<size_t>(c.num_layers) * positions;
  out.k_diff.assign(cells, 0.0);
  out.k_ref.assign(cells, 0.0);
  out.v_diff.assign(cells, 0.0);
  out.v_ref.assign(cells, 0.0);
  std::vector<float> pa(static_cast<size_t>(positions * width));
  std::vector<float> pb(pa.size());
  Backend* backend = impl->backend();
  for (int l = 0; l < c.num_layers; ++l) {
    for (int plane = 0; plane < 2; ++plane) {
      // Slab layout [layers][2 (K, V)][capacity positions][width] (engine/kv/kv_layout.h).
      const int64_t a_off = (int64_t{l} * 2 + plane) * a.capacity_positions() * width;
      const int64_t b_off = (int64_t{l} * 2 + plane) * b.capacity_positions() * width;
      DLLM_RETURN_IF_ERROR(backend->DownloadFloats(a.buffer(), a_off, std::span<float>(pa)));
      DLLM_RETURN_IF_ERROR(backend->DownloadFloats(b.buffer(), b_off, std::span<float>(pb)));
      std::vector<double>& diff = plane == 0 ? out.k_diff : out.v_diff;
      std::vector<double>& ref = plane == 0 ? out.k_ref : out.v_ref;
      for (int p = 0; p < positions; ++p) {
        double d2 = 0, r2 = 0;
        const float* x = pa.data() + p * width;
        const float* y = pb.data() + p * width;
        for (int64_t e = 0; e < width; ++e) {
          const double d = double(x[e]) - double(y[e]);
          d2 += d * d;
          r2 += double(y[e]) * double(y[e]);
        }
        diff[static_cast<size_t>(l) * positions + p] = d2;
        ref[static_cast<size_t>(l) * positions + p] = r2;
      }
    }
  }
  return out;
}

}  // namespace dllm
