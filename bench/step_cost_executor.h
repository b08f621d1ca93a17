// StepCostExecutor: a StepExecutor that forwards every call to the engine's real executor and
// measures what each forward pass computes (bench::StepCost). The serving simulator charges
// those costs to its virtual clock; its calibration mode records them next to the measured
// step time.
//
// After each Run (the step's forward, and Elastic-Cache's second pass of one sequence) it
// calls `on_run(step_so_far, this_pass)`: the passes of the current step so far, this one
// included, and this pass alone. EndStep (called from the engine observer's OnStep, which
// ends every step) returns the step's total and starts the next step at zero.
//
// Thread-safety: like the executor it wraps: the worker thread only, except the const KV
// accounting queries.
#ifndef DLLM_BENCH_STEP_COST_EXECUTOR_H_
#define DLLM_BENCH_STEP_COST_EXECUTOR_H_

#include <functional>
#include <memory>

#include "bench/latency_model.h"
#include "engine/scheduler/step_executor.h"

namespace dllm::bench {

// The cost of one forward pass of `batch` through a model of `num_layers` layers.
StepCost CostOfPass(const StepBatch& batch, int num_layers);

class StepCostExecutor final : public StepExecutor {
 public:
  using OnRun = std::function<void(const StepCost& step_so_far, const StepCost& pass)>;
  StepCostExecutor(std::unique_ptr<StepExecutor> inner, int num_layers, OnRun on_run)
      : inner_(std::move(inner)), num_layers_(num_layers), on_run_(std::move(on_run)) {}

  absl::Status Run(const StepBatch& batch, std::span<KvHandle* const> kv,
                   StepResult* result) override;
  absl::Status RunCapturingLogits(const StepBatch& batch, std::span<KvHandle* const> kv,
                                  int capture, StepResult* result,
                                  std::vector<std::vector<float>>* logits) override;
  absl::StatusOr<ShadowResult> RunShadow(const SequenceStep& step, KvHandle* kv) override {
    return inner_->RunShadow(step, kv);
  }
  bool ComputesAttentionMaps() const override { return inner_->ComputesAttentionMaps(); }
  int64_t KvBytesFor(int positions, const CacheParams& cache) const override {
    return inner_->KvBytesFor(positions, cache);
  }
  int64_t KvBudgetBytes() const override { return inner_->KvBudgetBytes(); }
  bool KvFits(int positions, const CacheParams& cache) const override {
    return inner_->KvFits(positions, cache);
  }
  absl::StatusOr<std::unique_ptr<KvHandle>> AllocateKv(int positions,
                                                       const CacheParams& cache) override {
    return inner_->AllocateKv(positions, cache);
  }
  double KvUsageRatio() const override { return inner_->KvUsageRatio(); }
  int64_t KvUsedBytes() const override { return inner_->KvUsedBytes(); }

  // The current step's cost; resets it (worker thread).
  StepCost EndStep();

 private:
  void Charge(const StepBatch& batch);

  std::unique_ptr<StepExecutor> inner_;
  const int num_layers_;
  OnRun on_run_;
  StepCost step_;
};

}  // namespace dllm::bench

#endif  // DLLM_BENCH_STEP_COST_EXECUTOR_H_
