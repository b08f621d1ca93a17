// Transformer: the forward pass of both model families over one ragged StepBatch.
//
// Per layer, for the query rows only: norm → Q/K/V → RoPE at absolute positions → write K/V
// into the sequence's slab → attention of the query rows over ALL cached positions of that
// sequence (bidirectional) → output projection → MLP. The final norm and LM head run only on
// the rows whose prediction is wanted (Dream: row p-1 predicts position p), and so does the
// last layer after its K/V (nothing else reads its outputs). The query rows of all sequences
// go through each GEMM together; attention stays per sequence.
//
// Contract: a full step (query_positions = all of [0, N)) rewrites the whole slab. A partial
// step reads the slab entries of the other positions as they were last written. Every
// sequence's result depends only on its own inputs and slab: per-row reductions run in a
// fixed order (batch invariance).
//
// Thread-safety: not thread-safe; the engine worker owns it.
#ifndef DLLM_ENGINE_MODEL_TRANSFORMER_H_
#define DLLM_ENGINE_MODEL_TRANSFORMER_H_

#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/model/model_config.h"
#include "engine/model/model_weights.h"
#include "engine/model/step_batch.h"

namespace dllm {

class Backend;

class Transformer {
 public:
  // Uploads the weights to `backend` (converted to its compute dtype). `backend` is not owned
  // and must outlive the transformer; `weights` may be released after Create returns.
  static absl::StatusOr<std::unique_ptr<Transformer>> Create(const ModelConfig& config,
                                                             const ModelWeights& weights,
                                                             Backend* backend);
  virtual ~Transformer() = default;

  // INVALID_ARGUMENT for malformed batches (positions out of range, unsorted, token ids out
  // of the vocabulary, slab too small). `result` gets one entry per sequence.
  virtual absl::Status Forward(const StepBatch& batch, StepResult* result) = 0;

  virtual const ModelConfig& config() const = 0;

  // Whether Forward fills SequenceStep::attention_maps (the backend computes attention
  // probabilities); when not, a step that asks for them fails with UNIMPLEMENTED.
  virtual bool computes_attention_maps() const = 0;
};

}  // namespace dllm

#endif  // DLLM_ENGINE_MODEL_TRANSFORMER_H_
