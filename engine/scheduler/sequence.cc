#include "engine/scheduler/sequence.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <numeric>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/core/status_macros.h"

namespace dllm {
namespace {

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

DecoderConfig MakeDecoderConfig(const GenerationRequest& request, const SequenceContext& context) {
  DecoderConfig config;
  config.mask_token_id = context.mask_token_id;
  config.end_token_ids = context.end_token_ids;
  config.params = request.decoding;
  return config;
}

// The answer region the decoder starts from: the request's seeded canvas, else all masks.
std::vector<int32_t> AnswerCanvas(const GenerationRequest& request, int32_t mask_token_id) {
  if (!request.canvas.empty()) return request.canvas;
  return std::vector<int32_t>(static_cast<size_t>(request.max_new_tokens), mask_token_id);
}

// The row that predicted `position`; rows are in ascending position order (the candidates),
// and every committed position has one.
const RowStats& RowAt(std::span<const RowStats> rows, int32_t position) {
  return *std::lower_bound(rows.begin(), rows.end(), position,
                           [](const RowStats& r, int32_t p) { return r.position < p; });
}

std::string BytesOf(const Tokenizer* tokenizer, int32_t token) {
  return tokenizer != nullptr ? tokenizer->TokenBytes(token) : std::string();
}

TokenLogprob ToTokenLogprob(const RowStats& row, int32_t token, const Tokenizer* tokenizer) {
  TokenLogprob out;
  out.token = token;
  out.logprob = row.token_logprob;
  out.bytes = BytesOf(tokenizer, token);
  out.top.reserve(static_cast<size_t>(row.top_count));
  for (int i = 0; i < row.top_count; ++i) {
    out.top.push_back(
        {row.top_tokens[i], row.top_logprobs[i], BytesOf(tokenizer, row.top_tokens[i])});
  }
  return out;
}

// NaN/Inf logits (corrupt or overflowing weights) come back as token -1 / NaN statistics;
// committing them would surface later as a misleading "token id -1" request error.
absl::Status CheckFinite(std::span<const RowStats> rows, int step) {
  for (const RowStats& r : rows) {
    if (r.argmax_token < 0 || r.token < 0 || !std::isfinite(r.argmax_prob) ||
        !std::isfinite(r.entropy_nats)) {
      return absl::InternalError(absl::StrCat(
          "the model produced non-finite logits (NaN or Inf) at position ", r.position, " in step ",
          step, ": the weights are corrupt or the activations overflowed"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

void FinishPending(const PendingRequest& pending, absl::Status status, FinishReason reason,
                   absl::Time now, EngineObserver* observer) {
  FinalEvent event;
  event.status = std::move(status);
  event.reason = reason;
  event.stats.prompt_tokens = static_cast<int>(pending.prompt_ids.size());
  const double waited = absl::ToDoubleSeconds(now - pending.submit_time);
  event.stats.queue_seconds = waited;
  event.stats.total_seconds = waited;
  pending.sink->OnFinal(event);
  if (observer != nullptr) observer->OnRequestDone(pending.request, event);
}

int PendingRequest::answer_masks(int32_t mask_token_id) const {
  if (request.canvas.empty()) return request.max_new_tokens;
  return static_cast<int>(std::count(request.canvas.begin(), request.canvas.end(), mask_token_id));
}

Sequence::Sequence(PendingRequest pending, std::unique_ptr<KvHandle> kv,
                   const SequenceContext& context, absl::Time admit_time)
    : pending_(std::move(pending)),
      kv_(std::move(kv)),
      context_(context),
      decoder_(MakeDecoderConfig(pending_.request, context), pending_.prompt_ids,
               AnswerCanvas(pending_.request, context.mask_token_id), pending_.suffix_ids),
      policy_(MakeCachePolicy(pending_.request.cache, context.vocab_size)) {
  stats_.prompt_tokens = static_cast<int>(pending_.prompt_ids.size());
  masks_at_start_ = decoder_.masks_left();
  if (pending_.request.logprobs.has_value()) {
    // A fixed token of a seeded canvas was never predicted: it reports itself, certain.
    answer_logprobs_.resize(static_cast<size_t>(decoder_.gen_length()));
    for (int i = 0; i < decoder_.gen_length(); ++i) {
      TokenLogprob& t = answer_logprobs_[i];
      t.token = decoder_.canvas()[decoder_.prompt_length() + i];
      t.bytes = BytesOf(context.tokenizer, t.token);
    }
  }
  stats_.queue_seconds = absl::ToDoubleSeconds(admit_time - pending_.submit_time);
}

bool Sequence::can_switch_tau() const {
  const CacheParams& cache = pending_.request.cache;
  return stats_.tau_switch_step < 0 && cache.policy == CachePolicyKind::kEntropy &&
         cache.entropy_threshold_under_load.has_value() &&
         pending_.request.deadline != absl::InfiniteFuture();
}

void Sequence::SwitchTauUnderLoad() {
  if (can_switch_tau()) stats_.tau_switch_step = decoder_.step();
}

SequenceStep Sequence::PlanStep(float tau_scale, float load_tau_scale) {
  const auto start = std::chrono::steady_clock::now();
  PlanInput input;
  input.step = decoder_.step();
  input.candidates = decoder_.candidates();
  input.block_start = decoder_.at_block_start();
  input.block_begin = decoder_.block_begin();
  input.block_end = decoder_.block_end();
  input.canvas_end = canvas_length();
  input.answer_begin = decoder_.prompt_length();
  input.answer_end = decoder_.prompt_length() + decoder_.gen_length();
  // Schedules without blocks are one block of the whole answer.
  input.block_length = pending_.request.decoding.schedule == Schedule::kBlock
                           ? pending_.request.decoding.block_length
                           : decoder_.gen_length();
  input.decided = decoder_.decided_flags();
  input.tau_scale = tau_scale;
  input.under_load = tau_switched();
  input.load_tau_scale = load_tau_scale;
  const CacheParams& cache = pending_.request.cache;
  plan_tau_nats_ =
      cache.policy == CachePolicyKind::kEntropy
          ? PlannedTau(cache.entropy_threshold,
                       cache.entropy_threshold_under_load.value_or(cache.entropy_threshold), input)
          : std::numeric_limits<float>::quiet_NaN();
  plan_block_begin_ = input.block_begin;
  plan_block_end_ = input.block_end;
  plan_ = policy_->Plan(input);
  plan_seconds_ = SecondsSince(start);
  stats_.decision_seconds += plan_seconds_;

  predict_ = decoder_.candidates();
  SequenceStep step;
  step.kv = kv_ ? kv_->slab() : nullptr;
  step.tokens = decoder_.canvas();
  step.query_positions = PlanQueryRows(plan_, predict_, canvas_length(), context_.shift_logits);
  step.predict_positions = predict_;
  planned_rows_ = static_cast<int64_t>(step.query_positions.size());
  if (policy_->WantsAttentionMaps()) {
    plan_query_rows_ = step.query_positions;
    step.attention_maps = &attention_maps_;
  }
  step.store_hidden_states = NeedsHiddenStates(pending_.request.cache);
  forward_decision_seconds_ = 0;
  const DecodingParams& d = pending_.request.decoding;
  step.sampling.temperature = EffectiveTemperature(d.temperature);
  step.sampling.top_k = d.top_k;
  step.sampling.top_p = d.top_p;
  step.sampling.seed = d.seed;
  step.sampling.top_logprobs = pending_.request.logprobs.value_or(0);
  step.step = decoder_.step();
  return step;
}

std::optional<SequenceStep> Sequence::ObserveForward(const SequenceStep& planned,
                                                     std::span<const RowStats> rows) {
  if (!policy_->WantsAttentionMaps()) return std::nullopt;
  ShowForward(rows, 0);
  const int first_layer = policy_->RecomputeFromLayer();
  if (first_layer <= 0) return std::nullopt;
  SequenceStep again = planned;
  again.query_positions.resize(planned.tokens.size());
  std::iota(again.query_positions.begin(), again.query_positions.end(), 0);
  again.first_layer = first_layer;
  again.store_hidden_states = true;
  again.attention_maps = &attention_maps_;
  plan_query_rows_ = again.query_positions;
  // The pass computes every row for (layers - first_layer) of the layers: counted as that
  // fraction of a full step's rows.
  const int layers = std::max(1, attention_maps_.layers);
  planned_rows_ +=
      static_cast<int64_t>(again.query_positions.size()) * (layers - first_layer) / layers;
  return again;
}

void Sequence::ObserveRecompute(const SequenceStep& recompute, std::span<const RowStats> rows) {
  ShowForward(rows, recompute.first_layer);
}

void Sequence::ShowForward(std::span<const RowStats> rows, int first_layer) {
  const auto start = std::chrono::steady_clock::now();
  ForwardOutcome outcome;
  outcome.query_rows = plan_query_rows_;
  outcome.predicted = rows;
  outcome.attention = &attention_maps_;
  outcome.first_layer = first_layer;
  policy_->ObserveForward(outcome);
  // The attention maps were computed for the policy alone: their time is decision time.
  forward_decision_seconds_ += SecondsSince(start) + attention_maps_.seconds;
  attention_maps_.seconds = 0;
}

void Sequence::EmitText(CommitEvent* event) {
  const std::span<const int32_t> canvas = decoder_.canvas();
  const int prompt = decoder_.prompt_length();
  std::string bytes;
  if (!answer_logprobs_.empty()) {
    event->text_logprobs.assign(answer_logprobs_.begin() + emitted_prefix_,
                                answer_logprobs_.begin() + decoder_.decided_prefix());
  }
  for (; emitted_prefix_ < decoder_.decided_prefix(); ++emitted_prefix_) {
    const int32_t token = canvas[prompt + emitted_prefix_];
    if (context_.tokenizer == nullptr || context_.tokenizer->IsSpecial(token)) continue;
    bytes += context_.tokenizer->TokenBytes(token);
  }
  std::string delta = utf8_.Append(bytes);
  if (decoder_.finished()) delta += utf8_.Finish();
  text_ += delta;
  event->text_delta = std::move(delta);
}

absl::Status Sequence::ApplyStep(std::span<const RowStats> rows, EngineObserver::StepInfo* info) {
  const int step = decoder_.step();
  DLLM_RETURN_IF_ERROR(CheckFinite(rows, step));
  absl::StatusOr<std::vector<CommittedToken>> committed = decoder_.Commit(rows);
  if (!committed.ok()) return committed.status();

  const auto start = std::chrono::steady_clock::now();
  policy_->Observe(step, *committed);
  const double decision = SecondsSince(start) + forward_decision_seconds_;
  stats_.decision_seconds += decision;

  ++stats_.steps;
  (plan_.full ? stats_.full_steps : stats_.partial_steps) += 1;
  const int64_t rows_computed = planned_rows_;
  stats_.rows_computed += rows_computed;
  stats_.predicted_rows += static_cast<int64_t>(rows.size());
  if (info != nullptr) {
    ++info->sequences;
    (plan_.full ? info->full_sequences : info->partial_sequences) += 1;
    info->rows += rows_computed;
    info->decision_seconds += plan_seconds_ + decision;
    info->committed_per_sequence.push_back(static_cast<int>(committed->size()));
    info->predicted_positions += static_cast<int64_t>(rows.size());
  }

  last_step_entropy_ = 0.0f;
  for (const CommittedToken& c : *committed) {
    last_step_entropy_ = std::max(last_step_entropy_, c.entropy_nats);
  }

  CommitEvent event;
  event.step = step;
  for (const CommittedToken& c : *committed) {
    event.positions.push_back(c.position - decoder_.prompt_length());
    event.tokens.push_back(c.token);
    event.entropy_nats.push_back(c.entropy_nats);
    entropy_sum_ += c.entropy_nats;
    ++entropy_count_;
    stats_.max_committed_entropy =
        entropy_count_ == 1 ? c.entropy_nats
                            : std::max(stats_.max_committed_entropy, double(c.entropy_nats));
    if (info != nullptr) info->committed_entropies.push_back(c.entropy_nats);
    if (!answer_logprobs_.empty()) {
      TokenLogprob& logprob = answer_logprobs_[c.position - decoder_.prompt_length()];
      logprob = ToTokenLogprob(RowAt(rows, c.position), c.token, context_.tokenizer);
      event.logprobs.push_back(logprob);
    }
  }
  if (!committed->empty()) {
    if (stats_.first_commit_seconds == 0) {
      stats_.first_commit_seconds =
          absl::ToDoubleSeconds(context_.clock->Now() - pending_.submit_time);
    }
    EmitText(&event);
    pending_.sink->OnCommit(event);
  }
  const int every = pending_.request.snapshot_every_steps;
  if (every > 0 && stats_.steps % every == 0 && !decoder_.finished()) EmitSnapshot(step);
  if (pending_.request.step_events) EmitStep(step, rows, *committed);
  return absl::OkStatus();
}

void Sequence::EmitSnapshot(int step) {
  SnapshotEvent snapshot;
  snapshot.step = step;
  const std::span<const int32_t> canvas = decoder_.canvas();
  Utf8Stream stream;
  for (int i = 0; i < decoder_.gen_length(); ++i) {
    const int32_t pos = decoder_.prompt_length() + i;
    if (!decoder_.decided(pos)) {
      snapshot.canvas_text += stream.Append({});
      snapshot.canvas_text += stream.Finish();
      snapshot.canvas_text += "\xE2\x96\x92";  // ▒
      continue;
    }
    const int32_t token = canvas[pos];
    if (decoder_.IsEndToken(token) && i >= decoder_.decided_prefix()) break;
    if (context_.tokenizer == nullptr || context_.tokenizer->IsSpecial(token)) continue;
    snapshot.canvas_text += stream.Append(context_.tokenizer->TokenBytes(token));
  }
  snapshot.canvas_text += stream.Finish();
  pending_.sink->OnSnapshot(snapshot);
}

void Sequence::EmitStep(int step, std::span<const RowStats> rows,
                        std::span<const CommittedToken> committed) {
  const int prompt = decoder_.prompt_length();
  StepEvent event;
  event.step = step;
  event.full = plan_.full;
  event.rows = planned_rows_;
  event.max_committed_entropy = last_step_entropy_;
  event.tau_nats = plan_tau_nats_;
  event.window_begin = std::max(0, plan_block_begin_ - prompt);
  event.window_end = std::max(event.window_begin, plan_block_end_ - prompt);
  for (const CommittedToken& c : committed) {
    event.committed_positions.push_back(c.position - prompt);
    event.committed_tokens.push_back(c.token);
  }
  // rows[i] answers predict_[i] (the planned candidates, ascending).
  for (size_t i = 0; i < rows.size() && i < predict_.size(); ++i) {
    if (decoder_.decided(predict_[i])) continue;
    event.provisional_positions.push_back(predict_[i] - prompt);
    event.provisional_tokens.push_back(rows[i].token);
  }
  pending_.sink->OnStep(event);
}

absl::StatusOr<std::vector<CommittedToken>> Sequence::DryCommit(
    std::span<const RowStats> rows) const {
  Decoder copy = decoder_;
  return copy.Commit(rows);
}

void Sequence::Finish(absl::Status status, FinishReason reason, EngineObserver* observer) {
  if (done_) return;
  done_ = true;
  kv_.reset();  // free the KV memory before anything else
  FinalEvent event;
  event.status = std::move(status);
  event.reason = reason;
  if (reason == FinishReason::kLength || reason == FinishReason::kEos) {
    event.reason = decoder_.step_limit_reached()  ? FinishReason::kStepLimit
                   : decoder_.end_token_reached() ? FinishReason::kEos
                                                  : FinishReason::kLength;
  }
  event.token_ids = decoder_.DecidedAnswer();
  if (!answer_logprobs_.empty()) {
    event.logprobs.assign(answer_logprobs_.begin(),
                          answer_logprobs_.begin() + static_cast<int64_t>(event.token_ids.size()));
  }
  event.text = text_;
  if (!decoder_.finished()) event.text += utf8_.Finish();
  stats_.generated_tokens = static_cast<int>(event.token_ids.size());
  stats_.mean_committed_entropy = entropy_count_ ? entropy_sum_ / entropy_count_ : 0.0;
  stats_.total_seconds = absl::ToDoubleSeconds(context_.clock->Now() - pending_.submit_time);
  event.stats = stats_;
  pending_.sink->OnFinal(event);
  if (observer != nullptr) observer->OnRequestDone(pending_.request, event);
}

}  // namespace dllm
