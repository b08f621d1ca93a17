// The production StepExecutor: Transformer::Forward over KvPool slabs.
#include <memory>
#include <numeric>
#include <utility>

#include "engine/decoding/cache_policy.h"
#include "engine/kv/kv_pool.h"
#include "engine/model/forward_inspection.h"
#include "engine/model/transformer.h"
#include "engine/scheduler/step_executor.h"

namespace dllm {
namespace {

class SlabHandle final : public KvHandle {
 public:
  explicit SlabHandle(std::unique_ptr<KvSlab> slab) : slab_(std::move(slab)) {}
  KvSlab* slab() override { return slab_.get(); }

 private:
  std::unique_ptr<KvSlab> slab_;
};

class TransformerExecutor final : public StepExecutor {
 public:
  TransformerExecutor(Transformer* transformer, KvPool* pool)
      : transformer_(transformer), pool_(pool) {}

  absl::Status Run(const StepBatch& batch, std::span<KvHandle* const>,
                   StepResult* result) override {
    return transformer_->Forward(batch, result);
  }
  absl::Status RunCapturingLogits(const StepBatch& batch, std::span<KvHandle* const>, int capture,
                                  StepResult* result,
                                  std::vector<std::vector<float>>* logits) override {
    return CaptureLogits(batch, capture, result, logits);
  }

  absl::StatusOr<ShadowResult> RunShadow(const SequenceStep& step, KvHandle* kv) override {
    if (kv == nullptr || kv->slab() == nullptr) {
      return absl::InvalidArgumentError("RunShadow: the sequence has no slab");
    }
    const int positions = static_cast<int>(step.tokens.size());
    // A second slab from the same pool: the shadow's memory counts against the budget, and
    // a step that cannot get it simply goes unsampled.
    absl::StatusOr<std::unique_ptr<KvSlab>> scratch = pool_->Allocate(positions, false);
    if (!scratch.ok()) return scratch.status();
    StepBatch batch;
    SequenceStep full = step;
    full.kv = scratch->get();
    full.attention_maps = nullptr;  // the policy's maps are the step's own, not the shadow's
    full.store_hidden_states = false;
    full.query_positions.resize(positions);
    std::iota(full.query_positions.begin(), full.query_positions.end(), 0);
    batch.sequences.push_back(std::move(full));
    ShadowResult out;
    StepResult result;
    absl::Status s = CaptureLogits(batch, 0, &result, &out.logits);
    if (!s.ok()) return s;
    out.rows = std::move(result[0]);
    absl::StatusOr<KvSquaredDiffs> diffs =
        CompareKvSlabs(*transformer_, *kv->slab(), **scratch, positions);
    if (!diffs.ok()) return diffs.status();
    out.kv = std::move(*diffs);
    return out;
  }

  bool ComputesAttentionMaps() const override { return transformer_->computes_attention_maps(); }
  int64_t KvBytesFor(int positions, const CacheParams& cache) const override {
    return pool_->BytesFor(positions, NeedsHiddenStates(cache), StateBytes(positions, cache));
  }
  int64_t KvBudgetBytes() const override { return pool_->budget_bytes(); }
  bool KvFits(int positions, const CacheParams& cache) const override {
    return pool_->Fits(positions, NeedsHiddenStates(cache), StateBytes(positions, cache));
  }
  absl::StatusOr<std::unique_ptr<KvHandle>> AllocateKv(int positions,
                                                       const CacheParams& cache) override {
    absl::StatusOr<std::unique_ptr<KvSlab>> slab =
        pool_->Allocate(positions, NeedsHiddenStates(cache), StateBytes(positions, cache));
    if (!slab.ok()) return slab.status();
    return std::unique_ptr<KvHandle>(new SlabHandle(std::move(*slab)));
  }
  double KvUsageRatio() const override { return pool_->usage_ratio(); }
  int64_t KvUsedBytes() const override { return pool_->used_bytes(); }

 private:
  int64_t StateBytes(int positions, const CacheParams& cache) const {
    return PolicyStateBytes(cache, pool_->layout().num_layers, positions);
  }
  // The logits rows of sequence `capture` of the batch (shadow steps).
  absl::Status CaptureLogits(const StepBatch& batch, int capture, StepResult* result,
                             std::vector<std::vector<float>>* logits) {
    if (capture < 0) return absl::InvalidArgumentError("capture index must be >= 0");
    std::vector<std::vector<std::vector<float>>> all;
    absl::Status s =
        ForwardWithLogits(*transformer_, batch, DebugLogitsRows::kPredicted, result, &all, capture);
    if (!s.ok()) return s;
    *logits = std::move(all[capture]);
    return absl::OkStatus();
  }

  Transformer* transformer_;
  KvPool* pool_;
};

}  // namespace

std::unique_ptr<StepExecutor> MakeTransformerExecutor(Transformer* transformer, KvPool* pool) {
  return std::make_unique<TransformerExecutor>(transformer, pool);
}

}  // namespace dllm
