// ScriptedEngine: the real engine (CreateEngineForTesting: worker, sequences, cache policies,
// queue, cancellation, deadlines, drain) over FakeExecutor with a scripted model, wrapped in a
// record of what its caller did. The server tests drive the gRPC and HTTP front ends with it,
// so what they check is what the production engine does, not what a stand-in does.
//
// The scripted model (a LLaDA-shaped config over FakeTokenizer's byte vocabulary):
//   - the token predicted at canvas position p is the byte ScriptedByte(p), whatever the
//     cache holds, so every cache policy gives the same answer;
//   - its confidence falls with p, so the default block schedule (steps = max_new_tokens)
//     commits one token per step, left to right: after n steps of a prompt of P tokens the
//     text is ScriptedText(P, n);
//   - its entropy is ScriptedEntropy(p): 1.0 nats at odd positions, 0.1 at even ones, so under
//     EntropyCache (τ 0.5) the step after committing an odd position is a full refresh.
// A request whose decoding.seed is one of ScriptedEngineOptions::failing_seeds decodes as any
// other but ends with kScriptedFailure instead of its answer: a sequence that fails while the
// others of its batch go on.
//
// Thread-safety: as Engine. The record accessors may be called from any thread.
#ifndef DLLM_TESTS_SUPPORT_SCRIPTED_ENGINE_H_
#define DLLM_TESTS_SUPPORT_SCRIPTED_ENGINE_H_

#include <algorithm>
#include <atomic>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "engine/engine.h"
#include "engine/engine_impl.h"
#include "tests/support/fake_executor.h"
#include "tests/support/fake_tokenizer.h"

namespace dllm::testing {

inline char ScriptedByte(int position) { return static_cast<char>('a' + position % 26); }
inline float ScriptedEntropy(int position) { return position % 2 == 1 ? 1.0f : 0.1f; }

// The answer's first `tokens` bytes for a prompt of `prompt_tokens` tokens.
inline std::string ScriptedText(int prompt_tokens, int tokens) {
  std::string text;
  for (int i = 0; i < tokens; ++i) text += ScriptedByte(prompt_tokens + i);
  return text;
}

inline RowStats ScriptedRow(std::span<const uint64_t>, int32_t position, const SequenceStep&) {
  RowStats r;
  r.token = r.argmax_token = ByteToken(static_cast<unsigned char>(ScriptedByte(position)));
  r.token_prob = r.argmax_prob = 0.9f - 1e-4f * static_cast<float>(position);
  r.margin = r.argmax_prob / 2;
  r.entropy_nats = ScriptedEntropy(position);
  return r;
}

inline absl::Status ScriptedFailure() { return absl::InternalError("scripted failure"); }

struct ScriptedEngineOptions {
  int queue_capacity = 64;  // waiting requests, as EngineOptions::queue_capacity
  int max_batch_sequences = 8;
  absl::Duration step_time = absl::Milliseconds(1);  // wall time of one forward
  EngineObserver* observer = nullptr;                // not owned
  std::vector<uint64_t> failing_seeds;               // requests that end with ScriptedFailure
};

class ScriptedEngine final : public Engine {
 public:
  explicit ScriptedEngine(const ScriptedEngineOptions& options = {})
      : failing_seeds_(options.failing_seeds) {
    EngineOptions engine_options;
    engine_options.queue_capacity = options.queue_capacity;
    engine_options.max_batch_sequences = options.max_batch_sequences;
    engine_options.max_new_tokens_limit = 2048;
    engine_options.cpu_threads = 1;
    engine_options.observer = options.observer;
    ModelConfig config = FakeConfig();
    config.max_positions = 4096;
    auto created =
        CreateEngineForTesting(engine_options, config,
                               std::make_unique<FakeExecutor>(engine_options.kv_budget_bytes,
                                                              ScriptedRow, options.step_time),
                               std::make_unique<FakeTokenizer>());
    // Only a broken test setup fails here; say so loudly rather than run without an engine.
    if (!created.ok()) std::abort();
    engine_ = *std::move(created);
  }
  ~ScriptedEngine() override { engine_->Drain(absl::ZeroDuration()); }

  absl::StatusOr<RequestId> Submit(GenerationRequest request,
                                   std::shared_ptr<EventSink> sink) override {
    {
      absl::MutexLock lock(&mu_);
      ++active_;  // before Submit: the final event may arrive before Submit returns
    }
    GenerationRequest copy = request;
    const bool fail = std::find(failing_seeds_.begin(), failing_seeds_.end(),
                                request.decoding.seed) != failing_seeds_.end();
    auto counted = std::make_shared<CountedSink>(this, std::move(sink), fail);
    absl::StatusOr<RequestId> id = engine_->Submit(std::move(request), std::move(counted));
    absl::MutexLock lock(&mu_);
    if (id.ok()) {
      submitted_.push_back(std::move(copy));
    } else {
      --active_;
    }
    return id;
  }
  void Cancel(RequestId id) override {
    cancel_calls_.fetch_add(1);
    engine_->Cancel(id);
  }
  void Drain(absl::Duration timeout) override { engine_->Drain(timeout); }
  const ModelInfo& model_info() const override { return engine_->model_info(); }
  const Tokenizer& tokenizer() const override { return engine_->tokenizer(); }
  absl::StatusOr<std::vector<int32_t>> TokenizeInput(
      const GenerationRequest& request) const override {
    tokenize_calls_.fetch_add(1);
    return engine_->TokenizeInput(request);
  }

  // The requests the engine accepted, as the caller handed them over.
  std::vector<GenerationRequest> submitted() const {
    absl::MutexLock lock(&mu_);
    return submitted_;
  }
  int cancel_calls() const { return cancel_calls_.load(); }
  int tokenize_calls() const { return tokenize_calls_.load(); }
  // Accepted requests whose final event has not been delivered yet.
  int active() const {
    absl::MutexLock lock(&mu_);
    return active_;
  }

 private:
  class CountedSink final : public EventSink {
   public:
    CountedSink(ScriptedEngine* owner, std::shared_ptr<EventSink> inner, bool fail)
        : owner_(owner), inner_(std::move(inner)), fail_(fail) {}
    void OnCommit(const CommitEvent& e) override { inner_->OnCommit(e); }
    void OnSnapshot(const SnapshotEvent& e) override { inner_->OnSnapshot(e); }
    void OnStep(const StepEvent& e) override { inner_->OnStep(e); }
    void OnFinal(const FinalEvent& e) override {
      if (fail_ && e.status.ok()) {
        FinalEvent failed = e;
        failed.status = ScriptedFailure();
        failed.reason = FinishReason::kError;
        inner_->OnFinal(failed);
      } else {
        inner_->OnFinal(e);
      }
      absl::MutexLock lock(&owner_->mu_);
      --owner_->active_;
    }

   private:
    ScriptedEngine* const owner_;
    const std::shared_ptr<EventSink> inner_;
    const bool fail_;
  };

  const std::vector<uint64_t> failing_seeds_;
  std::unique_ptr<Engine> engine_;
  mutable absl::Mutex mu_;
  std::vector<GenerationRequest> submitted_ ABSL_GUARDED_BY(mu_);
  int active_ ABSL_GUARDED_BY(mu_) = 0;
  std::atomic<int> cancel_calls_{0};
  mutable std::atomic<int> tokenize_calls_{0};
};

}  // namespace dllm::testing

#endif  // DLLM_TESTS_SUPPORT_SCRIPTED_ENGINE_H_
