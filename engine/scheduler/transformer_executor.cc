// The production StepExecutor: Transformer::Forward over KvPool slabs.
#include <memory>
#include <utility>

#include "engine/kv/kv_pool.h"
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
  int64_t KvBytesFor(int positions) const override { return pool_->BytesFor(positions); }
  int64_t KvBudgetBytes() const override { return pool_->budget_bytes(); }
  bool KvFits(int positions) const override { return pool_->Fits(positions); }
  absl::StatusOr<std::unique_ptr<KvHandle>> AllocateKv(int positions) override {
    absl::StatusOr<std::unique_ptr<KvSlab>> slab = pool_->Allocate(positions);
    if (!slab.ok()) return slab.status();
    return std::unique_ptr<KvHandle>(new SlabHandle(std::move(*slab)));
  }
  double KvUsageRatio() const override { return pool_->usage_ratio(); }
  int64_t KvUsedBytes() const override { return pool_->used_bytes(); }

 private:
  Transformer* transformer_;
  KvPool* pool_;
};

}  // namespace

std::unique_ptr<StepExecutor> MakeTransformerExecutor(Transformer* transformer, KvPool* pool) {
  return std::make_unique<TransformerExecutor>(transformer, pool);
}

}  // namespace dllm
