// Sequence: one admitted request inside the worker: decoder, cache policy, KV handle, event
// emission and statistics.
//
// Per step the worker calls PlanStep() (the cache policy's full/partial decision and the
// query/predict rows), runs the batch, then ApplyStep() (commit, policy observation, events).
// Finish() sends the one final event and releases the KV memory.
//
// Thread-safety: none; owned by the worker thread.
#ifndef DLLM_ENGINE_SCHEDULER_SEQUENCE_H_
#define DLLM_ENGINE_SCHEDULER_SEQUENCE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "engine/core/clock.h"
#include "engine/decoding/cache_policy.h"
#include "engine/decoding/decoder.h"
#include "engine/decoding/utf8_stream.h"
#include "engine/engine.h"
#include "engine/model/step_batch.h"
#include "engine/scheduler/step_executor.h"
#include "engine/tokenizer/tokenizer.h"

namespace dllm {

// A validated, tokenized request waiting for admission.
struct PendingRequest {
  RequestId id = 0;
  GenerationRequest request;
  std::vector<int32_t> prompt_ids;
  std::vector<int32_t> suffix_ids;  // GenerationRequest::suffix, tokenized
  std::shared_ptr<EventSink> sink;
  absl::Time submit_time;
  // Canvas positions: prompt, answer and suffix.
  int canvas_positions() const {
    return static_cast<int>(prompt_ids.size() + suffix_ids.size()) + request.max_new_tokens;
  }
  // Answer positions to generate: max_new_tokens, or the seeded canvas's masks.
  int answer_masks(int32_t mask_token_id) const;
};

// Model facts the sequences share.
struct SequenceContext {
  const Tokenizer* tokenizer = nullptr;  // for text deltas; not owned
  int32_t mask_token_id = -1;
  std::vector<int32_t> end_token_ids;
  bool shift_logits = false;  // Dream: row p-1 predicts p
  int vocab_size = 0;
  // The time of request timings and deadlines; not owned, never null.
  const Clock* clock = &SystemClock();
};

// Ends a request that never got admitted (cancelled or expired while queued, shutdown).
// `now` is the time it ends (its queue time counts up to it).
void FinishPending(const PendingRequest& pending, absl::Status status, FinishReason reason,
                   absl::Time now, EngineObserver* observer);

class Sequence {
 public:
  Sequence(PendingRequest pending, std::unique_ptr<KvHandle> kv, const SequenceContext& context,
           absl::Time admit_time);

  RequestId id() const { return pending_.id; }
  const GenerationRequest& request() const { return pending_.request; }
  bool done() const { return done_; }
  bool finished_decoding() const { return decoder_.finished(); }
  // For the completion forecast (engine/scheduler/completion_forecast.h): the answer masks at
  // admission and now, and the steps applied.
  int masks_at_start() const { return masks_at_start_; }
  int masks_left() const { return decoder_.masks_left(); }
  int steps_done() const { return stats_.steps; }
  int canvas_length() const { return static_cast<int>(decoder_.canvas().size()); }
  // Whether SwitchTauUnderLoad would switch: an EntropyCache request with a deadline and a
  // cache.entropy_threshold_under_load that has not switched yet.
  bool can_switch_tau() const;
  // From the coming step on, the policy's tau is cache.entropy_threshold_under_load
  // (SequenceStats::tau_switch_step records the step). No-op unless can_switch_tau().
  void SwitchTauUnderLoad();
  // Whether it switched: its steps from then on are planned with its tau under load.
  bool tau_switched() const { return stats_.tau_switch_step >= 0; }

  // Plans the coming step. The returned step's spans point into this sequence and stay
  // valid until ApplyStep.
  // `tau_scale` (> 0) multiplies an EntropyCache τ (ShadowSteps::tau_scale); a switched
  // sequence's τ under load is first scaled by `load_tau_scale` (in (0, 1],
  // ShadowSteps::load_tau_scale; TauUnderLoad).
  SequenceStep PlanStep(float tau_scale, float load_tau_scale);
  bool planned_full() const { return plan_.full; }
  KvHandle* kv() { return kv_.get(); }

  // For policies that decide from the forward (WantsAttentionMaps): shows the planned step's
  // forward to the policy. Returns the step that the policy asks to run next over every row
  // (Elastic-Cache's deep-layer recompute; `planned` is the step PlanStep returned), or
  // nullopt. Its rows go to ObserveRecompute and then, instead of the first rows, to ApplyStep.
  std::optional<SequenceStep> ObserveForward(const SequenceStep& planned,
                                             std::span<const RowStats> rows);
  void ObserveRecompute(const SequenceStep& recompute, std::span<const RowStats> rows);

  // Commits the step's predictions, informs the policy, emits the commit (and snapshot)
  // events, and adds to `info`. On error the sequence should be finished with it.
  absl::Status ApplyStep(std::span<const RowStats> rows, EngineObserver::StepInfo* info);

  // ---- Read-only views of the planned step (between PlanStep and ApplyStep) for shadow
  // steps (engine/scheduler/shadow/shadow_steps.h), which check it against a full forward.
  int step() const { return decoder_.step(); }  // the planned step's index
  int prompt_length() const { return decoder_.prompt_length(); }
  bool decided(int32_t position) const { return decoder_.decided(position); }
  // E of the latest applied step: max entropy of the tokens it committed (0 when none).
  float last_step_entropy() const { return last_step_entropy_; }
  // The commits the decoder would make from `rows`, without changing anything.
  absl::StatusOr<std::vector<CommittedToken>> DryCommit(std::span<const RowStats> rows) const;

  // Sends the final event (once), frees the KV memory and reports to the observer.
  void Finish(absl::Status status, FinishReason reason, EngineObserver* observer);

 private:
  // The policy's ObserveForward of a pass (first_layer 0: the step's own), timed as decision.
  void ShowForward(std::span<const RowStats> rows, int first_layer);
  void EmitText(CommitEvent* event);
  // The canvas as text, masked positions as "▒", to the sink (snapshot_every_steps).
  void EmitSnapshot(int step);
  void EmitStep(int step, std::span<const RowStats> rows,
                std::span<const CommittedToken> committed);

  PendingRequest pending_;
  std::unique_ptr<KvHandle> kv_;
  const SequenceContext& context_;
  Decoder decoder_;
  std::unique_ptr<CachePolicy> policy_;
  StepPlan plan_;
  // For policies that decide from the forward: the planned step's query rows and the
  // attention maps the forward fills (WantsAttentionMaps).
  std::vector<int32_t> plan_query_rows_;
  AttentionMaps attention_maps_;
  std::vector<int32_t> predict_;
  int64_t planned_rows_ = 0;
  double plan_seconds_ = 0;
  double forward_decision_seconds_ = 0;  // ObserveForward/ObserveRecompute and their maps
  float plan_tau_nats_ = 0;       // the planned step's EntropyCache tau (PlannedTau); NaN otherwise
  int32_t plan_block_begin_ = 0;  // the planned step's block/window, canvas positions
  int32_t plan_block_end_ = 0;
  Utf8Stream utf8_;
  std::string text_;
  int emitted_prefix_ = 0;  // answer positions already turned into text
  // Per answer position, the logprobs of its commit; empty unless the request asked.
  std::vector<TokenLogprob> answer_logprobs_;
  SequenceStats stats_;
  double entropy_sum_ = 0;
  float last_step_entropy_ = 0;  // E of the latest step (0 when it committed nothing)
  int64_t entropy_count_ = 0;
  bool done_ = false;
  int masks_at_start_ = 0;
};

}  // namespace dllm

#endif  // DLLM_ENGINE_SCHEDULER_SEQUENCE_H_
