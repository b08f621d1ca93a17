// StepExecutor: what the engine worker needs from a model, as an interface so the worker can
// be tested against a scripted fake. The production implementation wraps Transformer::Forward
// and the model's KvPool (MakeTransformerExecutor).
//
// Thread-safety: used by the worker thread only, except the const KV accounting queries
// (KvBytesFor, KvBudgetBytes), which Submit calls from any thread and must be thread-safe.
#ifndef DLLM_ENGINE_SCHEDULER_STEP_EXECUTOR_H_
#define DLLM_ENGINE_SCHEDULER_STEP_EXECUTOR_H_

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/model/forward_inspection.h"
#include "engine/model/step_batch.h"

namespace dllm {

class KvPool;
class KvSlab;
class Transformer;

// One sequence's KV memory. Releases its bytes on destruction.
class KvHandle {
 public:
  virtual ~KvHandle() = default;
  // The slab the forward writes (null for fakes that keep their own state).
  virtual KvSlab* slab() = 0;
};

class StepExecutor {
 public:
  virtual ~StepExecutor() = default;

  // Runs one ragged step. `kv[i]` is the handle of `batch.sequences[i]` (whose `kv` field is
  // already set to kv[i]->slab()). `result` gets one entry per sequence with one RowStats per
  // predict position, in order.
  virtual absl::Status Run(const StepBatch& batch, std::span<KvHandle* const> kv,
                           StepResult* result) = 0;

  // ---- Shadow steps (cache-quality sampling). Executors that cannot do them keep the
  // UNIMPLEMENTED defaults; the worker then runs the plain step and records no sample.

  // Like Run (bitwise the same results and slab writes), and also returns the fp32 logits
  // rows of sequence `capture`, one per predict position.
  virtual absl::Status RunCapturingLogits(const StepBatch& batch, std::span<KvHandle* const> kv,
                                          int capture, StepResult* result,
                                          std::vector<std::vector<float>>* logits) {
    return absl::UnimplementedError("this executor has no shadow steps");
  }

  struct ShadowResult {
    std::vector<RowStats> rows;              // one per predict position of the step
    std::vector<std::vector<float>> logits;  // the same rows' fp32 logits
    KvSquaredDiffs kv;                       // cached (kv's slab) against fresh (scratch)
  };
  // A full forward of `step` (every row; same canvas, predict positions and RNG key) into a
  // scratch slab that is freed on return, compared against `kv`'s slab, which is only read.
  // RESOURCE_EXHAUSTED when the scratch slab does not fit the KV budget now.
  virtual absl::StatusOr<ShadowResult> RunShadow(const SequenceStep& step, KvHandle* kv) {
    return absl::UnimplementedError("this executor has no shadow steps");
  }

  // Whether Run fills SequenceStep::attention_maps (the d2cache policy needs them).
  virtual bool ComputesAttentionMaps() const { return false; }

  // The budget a sequence of `positions` positions under cache policy `cache` takes: its K/V
  // slab (with every layer's input hidden states for elastic) and its policy's decision state
  // (PolicyStateBytes: attention maps for d2cache and elastic).
  virtual int64_t KvBytesFor(int positions, const CacheParams& cache) const = 0;
  virtual int64_t KvBudgetBytes() const = 0;
  virtual bool KvFits(int positions, const CacheParams& cache) const = 0;
  // RESOURCE_EXHAUSTED when the budget cannot hold it now.
  virtual absl::StatusOr<std::unique_ptr<KvHandle>> AllocateKv(int positions,
                                                               const CacheParams& cache) = 0;
  virtual double KvUsageRatio() const = 0;
  virtual int64_t KvUsedBytes() const = 0;
};

// Adapter over a Transformer and its KvPool; neither is owned, both must outlive it.
std::unique_ptr<StepExecutor> MakeTransformerExecutor(Transformer* transformer, KvPool* pool);

}  // namespace dllm

#endif  // DLLM_ENGINE_SCHEDULER_STEP_EXECUTOR_H_
