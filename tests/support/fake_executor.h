// FakeExecutor: a StepExecutor test double, a scripted model with a simulated KV cache. What
// the engine tests and the server tests (through ScriptedEngine) run the real engine over.
//
// FakeExecutor keeps, per sequence and position, a "KV entry": a hash of the position's token
// and of the whole canvas at the time the row was last recomputed (a real K/V row depends on
// every token through bidirectional attention). A prediction is a hash of all entries, so a
// partial step that leaves stale rows predicts differently from a full step, the effect a
// real approximate KV cache has; a full step is a pure function of the canvas.
#ifndef DLLM_TESTS_SUPPORT_FAKE_EXECUTOR_H_
#define DLLM_TESTS_SUPPORT_FAKE_EXECUTOR_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <new>
#include <span>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "engine/decoding/cache_policy.h"
#include "engine/model/model_config.h"
#include "engine/scheduler/step_executor.h"
#include "tests/support/fake_tokenizer.h"

namespace dllm::testing {

inline constexpr int32_t kFakeMask = kFakeVocab - 1;
inline constexpr int32_t kFakeEos = 2;
inline constexpr int32_t kFakeEot = 3;
inline constexpr int64_t kFakeBytesPerPosition = 100;

inline ModelConfig FakeConfig(bool dream = false) {
  ModelConfig c;
  c.family = dream ? ModelFamily::kDream : ModelFamily::kLlada;
  c.hidden_size = 8;
  c.num_layers = 1;
  c.num_heads = 1;
  c.num_kv_heads = 1;
  c.head_dim = 8;
  c.intermediate_size = 16;
  c.vocab_size = kFakeVocab;
  c.max_positions = 512;
  c.mask_token_id = kFakeMask;
  c.eos_token_id = kFakeEos;
  c.eot_token_id = kFakeEot;
  c.shift_logits = dream;
  return c;
}

inline uint64_t Mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// (cached view, position, step) -> RowStats (position is filled in by the executor).
using FakeRowFn = std::function<RowStats(std::span<const uint64_t> cached, int32_t position,
                                         const SequenceStep&)>;

// Default model: hash of the cached canvas and the position; ends with an end token with
// growing probability towards the end of the canvas.
inline RowStats HashRow(std::span<const uint64_t> cached, int32_t position, const SequenceStep& s) {
  uint64_t h = 1469598103934665603ull;
  for (uint64_t t : cached) h = Mix(h ^ t);
  h = Mix(h ^ (static_cast<uint64_t>(position) << 20));
  RowStats r;
  const int n = static_cast<int>(cached.size());
  const bool end = position > n - 6 && (h % 3 == 0);
  r.argmax_token = end ? kFakeEos : static_cast<int32_t>(10 + h % 50);
  r.argmax_prob = 0.05f + 0.95f * static_cast<float>((h >> 16) % 1000) / 1000.0f;
  r.entropy_nats = 3.0f * (1.0f - r.argmax_prob);
  r.margin = r.argmax_prob / 2;
  r.token = r.argmax_token;
  r.token_prob = r.argmax_prob;
  if (s.sampling.temperature > 0) {
    const uint64_t g = Mix(h ^ Mix(s.sampling.seed) ^ (static_cast<uint64_t>(s.step) << 40));
    r.token = static_cast<int32_t>(10 + g % 50);
    r.token_prob = 0.3f;
  }
  return r;
}

class FakeExecutor final : public StepExecutor {
 public:
  // `step_delay`: how long each Run takes, as a real forward would (server tests use it to
  // keep requests in flight).
  explicit FakeExecutor(int64_t budget_bytes, FakeRowFn fn = HashRow,
                        absl::Duration step_delay = absl::ZeroDuration())
      : budget_bytes_(budget_bytes), fn_(std::move(fn)), step_delay_(step_delay) {}

  struct Kv final : KvHandle {
    Kv(FakeExecutor* o, int positions, int64_t bytes)
        : owner(o), cached(positions, 0), bytes(bytes) {}
    ~Kv() override { owner->used_bytes_ -= bytes; }
    KvSlab* slab() override { return nullptr; }
    FakeExecutor* owner;
    std::vector<uint64_t> cached;
    int64_t bytes;
  };

  absl::Status Run(const StepBatch& batch, std::span<KvHandle* const> kv,
                   StepResult* result) override {
    ++steps_;
    if (step_delay_ > absl::ZeroDuration()) absl::SleepFor(step_delay_);
    if (fail_next_) {
      fail_next_ = false;
      return absl::InternalError("scripted forward failure");
    }
    if (throw_bad_alloc_next_) {
      throw_bad_alloc_next_ = false;
      throw std::bad_alloc();  // as a host forward's scratch allocation under a memory limit
    }
    result->assign(batch.sequences.size(), {});
    for (size_t i = 0; i < batch.sequences.size(); ++i) {
      const SequenceStep& s = batch.sequences[i];
      auto* handle = static_cast<Kv*>(kv[i]);
      if (handle == nullptr || handle->cached.size() != s.tokens.size()) {
        return absl::InvalidArgumentError("kv handle does not match the canvas");
      }
      uint64_t canvas_digest = 0;
      for (int32_t t : s.tokens) canvas_digest = Mix(canvas_digest ^ static_cast<uint64_t>(t));
      for (int32_t q : s.query_positions) {
        if (q < 0 || q >= static_cast<int32_t>(s.tokens.size()))
          return absl::InvalidArgumentError("query position out of range");
        handle->cached[q] = Mix(canvas_digest ^ (static_cast<uint64_t>(s.tokens[q]) << 32));
      }
      rows_ += static_cast<int64_t>(s.query_positions.size());
      for (int32_t p : s.predict_positions) {
        // A prediction needs a fresh own row (LLaDA) or row p-1 (Dream's shift).
        RowStats r = fn_(handle->cached, p, s);
        r.position = p;
        (*result)[i].push_back(r);
      }
    }
    return absl::OkStatus();
  }
  // Hidden states (elastic) double a position's bytes; policy state is not counted here.
  int64_t KvBytesFor(int positions, const CacheParams& cache) const override {
    return positions * kFakeBytesPerPosition * (NeedsHiddenStates(cache) ? 2 : 1);
  }
  int64_t KvBudgetBytes() const override { return budget_bytes_; }
  bool KvFits(int positions, const CacheParams& cache) const override {
    return used_bytes_ + KvBytesFor(positions, cache) <= budget_bytes_;
  }
  absl::StatusOr<std::unique_ptr<KvHandle>> AllocateKv(int positions,
                                                       const CacheParams& cache) override {
    if (!KvFits(positions, cache)) return absl::ResourceExhaustedError("fake KV budget");
    used_bytes_ += KvBytesFor(positions, cache);
    return std::unique_ptr<KvHandle>(new Kv(this, positions, KvBytesFor(positions, cache)));
  }
  double KvUsageRatio() const override { return double(used_bytes_) / budget_bytes_; }
  int64_t KvUsedBytes() const override { return used_bytes_; }

  std::atomic<int64_t> used_bytes_{0};
  std::atomic<int> steps_{0};
  std::atomic<int64_t> rows_{0};
  std::atomic<bool> fail_next_{false};
  std::atomic<bool> throw_bad_alloc_next_{false};

 private:
  int64_t budget_bytes_;
  FakeRowFn fn_;
  absl::Duration step_delay_;
};

}  // namespace dllm::testing

#endif  // DLLM_TESTS_SUPPORT_FAKE_EXECUTOR_H_
