// The one public header of the engine: what server/, bench/ and tests include. It brings the
// value types of engine/core/params.h and engine/shadow_sampling.h with it.
//
// An Engine owns one model on one backend and one worker thread that alone touches the
// backend. Callers Submit() requests from any thread; the worker batches all active
// sequences into one ragged forward per step and reports progress through each request's
// EventSink. Every accepted request receives exactly one OnFinal() call, whatever happens
// (finished, cancelled, deadline, engine shutdown, internal error).
//
// Thread-safety: all public methods of Engine are thread-safe. EventSink and EngineObserver
// methods are called on the worker thread and must not block.
#ifndef DLLM_ENGINE_ENGINE_H_
#define DLLM_ENGINE_ENGINE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "engine/core/clock.h"
#include "engine/core/params.h"
#include "engine/core/retry_after.h"
#include "engine/core/row_stats.h"
#include "engine/shadow_sampling.h"
#include "engine/tokenizer/chat_template.h"

namespace dllm {

class Tokenizer;

// ---------------------------------------------------------------- requests
// DecodingParams, CacheParams and their enums: engine/core/params.h. Shadow sampling's
// options and samples (EngineOptions::shadow, EngineObserver::OnShadowSample):
// engine/shadow_sampling.h.

// Exactly one of prompt_text / messages / prompt_ids is used, in that order of precedence
// when several are set: callers set one. ChatMessage comes from engine/tokenizer/chat_template.h.

struct GenerationRequest {
  std::string id;                          // caller's id, echoed in logs and events
  std::optional<std::string> prompt_text;  // raw text, tokenized without a chat template
  std::vector<ChatMessage> messages;       // rendered with the model's chat template
  std::vector<int32_t> prompt_ids;         // used verbatim
  int max_new_tokens = 64;                 // canvas length G
  // Infilling: fixed text after the answer canvas (prompt ++ G masks ++ suffix), tokenized
  // like prompt_text. The model reads it at every step (attention is bidirectional); it is
  // never changed and is not part of the answer. Empty: none. suffix_ids: the same as ids,
  // used verbatim when `suffix` is empty.
  std::string suffix;
  std::vector<int32_t> suffix_ids;
  // A seeded answer canvas, as token ids: ModelInfo::mask_token_id marks a position to
  // generate, any other id is fixed (never unmasked or changed; the schedules and caches
  // treat it like the prompt, and the answer's text includes it). Its length is the answer
  // length: max_new_tokens must equal it. Empty: max_new_tokens masks.
  std::vector<int32_t> canvas;
  DecodingParams decoding;
  CacheParams cache;
  int snapshot_every_steps = 0;  // 0: no provisional canvas snapshots
  bool step_events = false;      // true: EventSink::OnStep after every step
  // Set: every committed token's log-probability, with this many alternatives, in [0,
  // kMaxTopLogprobs] (engine/core/row_stats.h); see TokenLogprob. Unset: none, at no cost.
  std::optional<int> logprobs;
  absl::Time deadline = absl::InfiniteFuture();
};

// ---------------------------------------------------------------- events

// kStepLimit: decoding.max_denoising_steps ended decoding; its last step committed every mask
// left. Like kLength and kEos it is a success (OK status) with a complete answer.
enum class FinishReason { kLength, kEos, kCancelled, kDeadline, kError, kStepLimit };
const char* FinishReasonName(FinishReason reason);

struct SequenceStats {
  int prompt_tokens = 0;
  int generated_tokens = 0;  // tokens of the answer before the first end token
  int steps = 0;
  int full_steps = 0;
  int partial_steps = 0;
  int64_t rows_computed = 0;  // query rows summed over steps
  // Rows whose statistics (argmax, probability, entropy over the whole vocabulary) the LM
  // head computed, summed over steps: every candidate of every step, whatever the policy.
  int64_t predicted_rows = 0;
  double decision_seconds = 0;  // time spent in the cache policy's decisions
  double mean_committed_entropy = 0;
  double max_committed_entropy = 0;
  // The first step planned with cache.entropy_threshold_under_load, the worker having
  // forecast that the request's deadline was at risk; -1: it never switched.
  int tau_switch_step = -1;
  double queue_seconds = 0;
  double first_commit_seconds = 0;  // from submission
  double total_seconds = 0;         // from submission to final event
  double RefreshRatio() const { return steps ? double(full_steps) / steps : 0.0; }
};

// A committed token's log-probability under the model's distribution at the position, at the
// step that committed it (temperature 1, full vocabulary: log_softmax of the logits, whatever
// the sampling filters), and the most probable tokens of that distribution. A diffusion model
// commits out of order, so this is the distribution given the canvas at that step, with
// the positions still masked then; a later step never changes it.
struct TopLogprob {
  int32_t token = 0;
  float logprob = 0;
  std::string bytes;  // the token's raw bytes (Tokenizer::TokenBytes); may split a character
};
struct TokenLogprob {
  int32_t token = 0;
  float logprob = 0;
  std::string bytes;
  // Most probable first (ties: lower id); GenerationRequest::logprobs entries.
  std::vector<TopLogprob> top;
};

struct CommitEvent {
  int step = 0;
  std::vector<int32_t> positions;  // canvas-relative answer positions committed this step
  std::vector<int32_t> tokens;
  std::vector<float> entropy_nats;  // of each committed token's distribution when committed
  // Newly final text: append-only, never splits a UTF-8 character. Text after the first
  // end token is never emitted. May be empty when the committed tokens are not yet a prefix.
  std::string text_delta;
  // With GenerationRequest::logprobs only (else empty): one per committed token, aligned with
  // `tokens`; and one per answer token that this event made part of the final prefix, in
  // answer order (the tokens whose bytes text_delta carries, special tokens included).
  std::vector<TokenLogprob> logprobs;
  std::vector<TokenLogprob> text_logprobs;
};

struct SnapshotEvent {
  int step = 0;
  std::string canvas_text;  // answer region, masks rendered as the placeholder "▒"
};

// One denoising step of one request, sent when GenerationRequest::step_events is set: what
// the step computed (cache decision, rows), what it committed and what it proposed for the
// positions still masked. Answer-relative positions throughout (0 = first answer token).
struct StepEvent {
  int step = 0;
  bool full = false;  // recomputed every row (cache refresh); else partial
  int64_t rows = 0;   // query rows this request computed in the step
  // Max entropy (nats) of the tokens committed in the step; 0 when it committed none. This is
  // the scalar EntropyCache compares with tau to decide the next step.
  float max_committed_entropy = 0;
  // The tau this step's decision used (the request's entropy_threshold, or its
  // entropy_threshold_under_load from SequenceStats::tau_switch_step on, times the engine's
  // autotune scale) for the entropy policy; NaN for the other policies.
  float tau_nats = 0;
  int32_t window_begin = 0;  // [window_begin, window_end): the step's block or window
  int32_t window_end = 0;
  std::vector<int32_t> committed_positions;  // ascending
  std::vector<int32_t> committed_tokens;
  // The step's proposals at positions it predicted but left masked (provisional tokens).
  std::vector<int32_t> provisional_positions;  // ascending
  std::vector<int32_t> provisional_tokens;
};

struct FinalEvent {
  // OK for kLength/kEos/kStepLimit; CANCELLED, DEADLINE_EXCEEDED, ... otherwise.
  absl::Status status;
  FinishReason reason = FinishReason::kLength;
  std::string text;                // full answer, cut at the first end token
  std::vector<int32_t> token_ids;  // the same, as ids
  // With GenerationRequest::logprobs only (else empty): aligned with token_ids.
  std::vector<TokenLogprob> logprobs;
  SequenceStats stats;
};

// Receives one request's progress. Called on the worker thread; must not block. The engine
// keeps its reference until after OnFinal returns.
class EventSink {
 public:
  virtual ~EventSink() = default;
  virtual void OnCommit(const CommitEvent& event) = 0;
  virtual void OnSnapshot(const SnapshotEvent& event) {}
  // After every step (commits and snapshot of that step first), when the request asked.
  virtual void OnStep(const StepEvent& event) {}
  virtual void OnFinal(const FinalEvent& event) = 0;
};

// Engine-level observations for metrics. Called on the worker thread; must not block.
class EngineObserver {
 public:
  virtual ~EngineObserver() = default;
  struct StepInfo {
    int sequences = 0;       // batch size of this step
    int full_sequences = 0;  // sequences that did a full refresh
    int partial_sequences = 0;
    int64_t rows = 0;    // query rows over the whole batch
    double seconds = 0;  // wall time of the step (plan + forward + commit)
    double decision_seconds = 0;
    std::vector<float> committed_entropies;  // one per token committed this step
    // Per sequence of the step, in batch order: tokens it committed (vLLM's accepted tokens
    // per draft, a draft being one sequence's denoising step).
    std::vector<int> committed_per_sequence;
    int64_t predicted_positions = 0;  // canvas positions predicted (vLLM's draft tokens)
  };
  virtual void OnStep(const StepInfo& info) {}
  // Gauges, reported after every step and every admission change.
  struct QueueInfo {
    int waiting = 0;
    int running = 0;
    double kv_usage_ratio = 0;
    // Forecast seconds to work off the running and queued requests at full batch
    // (engine/scheduler/completion_forecast.h): the load signal an autoscaler needs. 0 before
    // the engine has measured a step and a finished sequence.
    double backlog_seconds = 0;
  };
  virtual void OnQueue(const QueueInfo& info) {}
  virtual void OnRequestDone(const GenerationRequest& request, const FinalEvent& event) {}

  // One sampled partial step checked against a shadow full forward of the same canvas
  // (EngineOptions::shadow; ShadowSample in engine/shadow_sampling.h). Called before the
  // step's commits are applied, hence before the request's final event.
  virtual void OnShadowSample(const ShadowSample& sample) {}
};

// ---------------------------------------------------------------- engine

enum class BackendKind { kCpu, kCuda };

struct EngineOptions {
  std::string model_dir;
  BackendKind backend = BackendKind::kCpu;
  int max_batch_sequences = 8;
  int64_t kv_budget_bytes = int64_t{1} << 30;
  int queue_capacity = 64;  // waiting requests; Submit beyond it returns RESOURCE_EXHAUSTED
  // Cost-aware admission (engine/scheduler/worker.h): Submit refuses a request with a deadline
  // that the backlog forecast says it cannot meet. false: such requests queue and expire.
  bool refuse_late_requests = true;
  // SLO-aware tau (engine/scheduler/worker.h): a request with a deadline and a
  // cache.entropy_threshold_under_load switches to it once the time to its deadline is under
  // this times its forecast time left. 0: never; in [0, 1000].
  double tau_switch_slack_ratio = 3;
  int cpu_threads = 0;  // 0: one per hardware thread
  int max_new_tokens_limit = 1024;
  ShadowOptions shadow;                // shadow sampling and τ autotuning; off by default
  EngineObserver* observer = nullptr;  // not owned; may be null; must outlive the engine
  // The time of deadlines and request timings; not owned, must outlive the engine. Null: the
  // system clock. The serving simulator passes a virtual one (engine/core/clock.h).
  const Clock* clock = nullptr;
};

struct ModelInfo {
  std::string family;  // "llada" | "dream"
  std::string model_dir;
  int vocab_size = 0;
  int hidden_size = 0;
  int num_layers = 0;
  int max_positions = 0;
  int32_t mask_token_id = -1;
  std::vector<int32_t> end_token_ids;
  // Answer length when a request sets none: generation_config.json's max_new_tokens or
  // gen_length when the folder has one, else 64.
  int default_max_new_tokens = 64;
  DecodingParams default_decoding;  // per-family defaults
  CacheParams default_cache;        // EntropyCache at the family's tuned tau and k (model_family.h)
  // Multiply-adds of the model's arithmetic (engine/model/step_flops.h halved), for cost per
  // token that does not depend on the machine: a computed query row costs
  // row_macs + key_macs * (keys it attends to) over all layers, a predicted row adds
  // lm_head_macs. Norms, RoPE and softmax are left out (under 1% at every shipped shape).
  double row_macs = 0;
  double key_macs = 0;
  double lm_head_macs = 0;
};

using RequestId = uint64_t;

class Engine {
 public:
  // Loads the model, builds the backend and starts the worker thread.
  static absl::StatusOr<std::unique_ptr<Engine>> Create(const EngineOptions& options);
  virtual ~Engine() = default;  // cancels what is left, joins the worker

  // Validates, tokenizes and enqueues. Errors: INVALID_ARGUMENT (bad parameters, naming the
  // field), RESOURCE_EXHAUSTED (queue full, request larger than the KV budget, or a request
  // with a deadline that the forecast says it cannot meet at the current load: cost-aware
  // admission, engine/scheduler/worker.h), UNAVAILABLE (draining or shut down). On OK the
  // sink will get exactly one OnFinal. A load refusal carries RetryAfter
  // (engine/core/retry_after.h): the forecast time to work off the backlog, at least 1 s.
  virtual absl::StatusOr<RequestId> Submit(GenerationRequest request,
                                           std::shared_ptr<EventSink> sink) = 0;

  // Cancels a queued or running request; it ends with FinishReason::kCancelled within one
  // step. Unknown or finished ids are ignored.
  virtual void Cancel(RequestId id) = 0;

  // Stops admitting (Submit returns UNAVAILABLE), waits up to `timeout` for in-flight work,
  // then cancels what remains. Returns when every accepted request got its final event.
  virtual void Drain(absl::Duration timeout) = 0;

  virtual const ModelInfo& model_info() const = 0;
  virtual const Tokenizer& tokenizer() const = 0;
  // Renders and tokenizes a request's input as Submit would, without enqueueing.
  virtual absl::StatusOr<std::vector<int32_t>> TokenizeInput(
      const GenerationRequest& request) const = 0;
};

}  // namespace dllm

#endif  // DLLM_ENGINE_ENGINE_H_
