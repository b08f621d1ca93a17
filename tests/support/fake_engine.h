// FakeEngine: an in-memory Engine for server tests. Each request "generates" max_new_tokens
// tokens, one per step, on its own worker thread: token i has id 1000+i and text "w<i> ".
// It honours Cancel, deadlines, Drain and a queue capacity (RESOURCE_EXHAUSTED), sends
// snapshots every snapshot_every_steps steps, and records what it was given.
#ifndef DLLM_TESTS_SUPPORT_FAKE_ENGINE_H_
#define DLLM_TESTS_SUPPORT_FAKE_ENGINE_H_

#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "engine/engine.h"
#include "engine/tokenizer/tokenizer.h"

namespace dllm::testing {

class FakeTokenizer : public Tokenizer {
 public:
  // One id per byte, offset by 10.
  using Tokenizer::Encode;
  std::vector<int32_t> Encode(std::string_view text, std::span<const TextRange>) const override {
    std::vector<int32_t> ids;
    for (unsigned char c : text) ids.push_back(10 + c);
    return ids;
  }
  std::string Decode(std::span<const int32_t> ids, bool) const override {
    std::string out;
    for (int32_t id : ids) out += TokenBytes(id);
    return out;
  }
  std::string TokenBytes(int32_t id) const override {
    if (id >= 10 && id < 266) return std::string(1, static_cast<char>(id - 10));
    return absl::StrCat("<", id, ">");
  }
  std::optional<int32_t> TokenToId(std::string_view) const override { return std::nullopt; }
  bool IsSpecial(int32_t) const override { return false; }
  int32_t size() const override { return 2000; }
};

class FakeEngine : public Engine {
 public:
  explicit FakeEngine(int queue_capacity = 64, absl::Duration step_time = absl::Milliseconds(1),
                      EngineObserver* observer = nullptr)
      : queue_capacity_(queue_capacity), step_time_(step_time), observer_(observer) {
    info_.family = "llada";
    info_.model_dir = "fake";
    info_.vocab_size = 2000;
    info_.hidden_size = 16;
    info_.num_layers = 2;
    info_.max_positions = 4096;
    info_.mask_token_id = 1999;
    info_.end_token_ids = {1998};
    info_.default_decoding.steps = 0;
    info_.default_decoding.block_length = 32;
    info_.default_cache.policy = CachePolicyKind::kEntropy;
  }
  ~FakeEngine() override { Drain(absl::ZeroDuration()); }

  absl::StatusOr<RequestId> Submit(GenerationRequest request,
                                   std::shared_ptr<EventSink> sink) override {
    absl::MutexLock lock(&mu_);
    if (draining_) return absl::UnavailableError("engine is draining");
    if (active_ >= queue_capacity_) return absl::ResourceExhaustedError("queue is full");
    if (request.prompt_ids.empty() && !request.prompt_text && request.messages.empty()) {
      return absl::InvalidArgumentError("prompt: empty");
    }
    const RequestId id = next_id_++;
    ++active_;
    submitted_.push_back(request);
    auto cancelled = std::make_shared<std::atomic<bool>>(false);
    cancel_flags_[id] = cancelled;
    threads_.emplace_back([this, id, request = std::move(request), sink, cancelled]() {
      Run(id, request, sink, cancelled);
    });
    return id;
  }

  void Cancel(RequestId id) override {
    absl::MutexLock lock(&mu_);
    ++cancel_calls_;
    if (auto it = cancel_flags_.find(id); it != cancel_flags_.end()) it->second->store(true);
  }

  void Drain(absl::Duration timeout) override {
    {
      absl::MutexLock lock(&mu_);
      draining_ = true;
      auto done = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return active_ == 0; };
      mu_.AwaitWithTimeout(absl::Condition(&done), timeout);
      for (auto& [id, flag] : cancel_flags_) flag->store(true);
    }
    std::vector<std::thread> threads;
    {
      absl::MutexLock lock(&mu_);
      threads.swap(threads_);
    }
    for (auto& t : threads) t.join();
  }

  const ModelInfo& model_info() const override { return info_; }
  const Tokenizer& tokenizer() const override { return tokenizer_; }

  absl::StatusOr<std::vector<int32_t>> TokenizeInput(
      const GenerationRequest& request) const override {
    if (!request.prompt_ids.empty()) return request.prompt_ids;
    if (request.prompt_text) return tokenizer_.Encode(*request.prompt_text);
    if (request.messages.empty()) return absl::InvalidArgumentError("messages: empty");
    std::string text;
    for (const auto& m : request.messages) text += "<" + m.role + ">" + m.content;
    return tokenizer_.Encode(text);
  }

  std::vector<GenerationRequest> submitted() const {
    absl::MutexLock lock(&mu_);
    return submitted_;
  }
  int cancel_calls() const {
    absl::MutexLock lock(&mu_);
    return cancel_calls_;
  }
  int active() const {
    absl::MutexLock lock(&mu_);
    return active_;
  }

  static std::string ExpectedText(int tokens) {
    std::string text;
    for (int i = 0; i < tokens; ++i) absl::StrAppend(&text, "w", i, " ");
    return text;
  }

 private:
  void Run(RequestId id, const GenerationRequest& request, const std::shared_ptr<EventSink>& sink,
           const std::shared_ptr<std::atomic<bool>>& cancelled) {
    const absl::Time start = absl::Now();
    FinalEvent final_event;
    final_event.reason = FinishReason::kLength;
    final_event.stats.prompt_tokens = static_cast<int>(request.prompt_ids.size());
    for (int step = 0; step < request.max_new_tokens; ++step) {
      absl::SleepFor(step_time_);
      if (cancelled->load()) {
        final_event.reason = FinishReason::kCancelled;
        final_event.status = absl::CancelledError("cancelled");
        break;
      }
      if (absl::Now() > request.deadline) {
        final_event.reason = FinishReason::kDeadline;
        final_event.status = absl::DeadlineExceededError("deadline");
        break;
      }
      CommitEvent commit;
      commit.step = step;
      commit.positions = {step};
      commit.tokens = {1000 + step};
      commit.text_delta = absl::StrCat("w", step, " ");
      sink->OnCommit(commit);
      final_event.text += commit.text_delta;
      final_event.token_ids.push_back(1000 + step);
      ++final_event.stats.generated_tokens;
      ++final_event.stats.steps;
      ++(step % 2 == 0 ? final_event.stats.full_steps : final_event.stats.partial_steps);
      if (request.snapshot_every_steps > 0 && (step + 1) % request.snapshot_every_steps == 0) {
        SnapshotEvent snapshot;
        snapshot.step = step;
        snapshot.canvas_text = final_event.text;
        for (int i = step + 1; i < request.max_new_tokens; ++i) snapshot.canvas_text += "▒";
        sink->OnSnapshot(snapshot);
      }
      if (observer_ != nullptr) {
        EngineObserver::StepInfo info;
        info.sequences = 1;
        info.full_sequences = step % 2 == 0 ? 1 : 0;
        info.partial_sequences = 1 - info.full_sequences;
        info.rows = 4;
        info.seconds = 0.001;
        info.committed_entropies = {0.25f};
        observer_->OnStep(info);
      }
    }
    final_event.stats.total_seconds = absl::ToDoubleSeconds(absl::Now() - start);
    final_event.stats.first_commit_seconds = final_event.stats.steps > 0 ? 0.001 : 0;
    if (observer_ != nullptr) observer_->OnRequestDone(request, final_event);
    sink->OnFinal(final_event);
    absl::MutexLock lock(&mu_);
    --active_;
    cancel_flags_.erase(id);
  }

  const int queue_capacity_;
  const absl::Duration step_time_;
  EngineObserver* const observer_;
  ModelInfo info_;
  FakeTokenizer tokenizer_;
  mutable absl::Mutex mu_;
  bool draining_ ABSL_GUARDED_BY(mu_) = false;
  int active_ ABSL_GUARDED_BY(mu_) = 0;
  int cancel_calls_ ABSL_GUARDED_BY(mu_) = 0;
  RequestId next_id_ ABSL_GUARDED_BY(mu_) = 1;
  std::vector<GenerationRequest> submitted_ ABSL_GUARDED_BY(mu_);
  std::map<RequestId, std::shared_ptr<std::atomic<bool>>> cancel_flags_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> threads_ ABSL_GUARDED_BY(mu_);
};

}  // namespace dllm::testing

#endif  // DLLM_TESTS_SUPPORT_FAKE_ENGINE_H_
