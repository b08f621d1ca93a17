#include "server/response_mapping.h"

#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include "proto/param_proto.h"
#include "server/limit_fields.h"

namespace dllm {

v1::FinishReason ToProto(FinishReason reason) {
  switch (reason) {
    case FinishReason::kLength:
      return v1::FINISH_REASON_LENGTH;
    case FinishReason::kEos:
      return v1::FINISH_REASON_EOS;
    case FinishReason::kCancelled:
      return v1::FINISH_REASON_CANCELLED;
    case FinishReason::kDeadline:
      return v1::FINISH_REASON_DEADLINE;
    case FinishReason::kStepLimit:
      return v1::FINISH_REASON_STEP_LIMIT;
    case FinishReason::kError:
      return v1::FINISH_REASON_UNSPECIFIED;
  }
  return v1::FINISH_REASON_UNSPECIFIED;
}

namespace {

void FillTokenLogprobs(const std::vector<TokenLogprob>& in,
                       google::protobuf::RepeatedPtrField<v1::TokenLogprob>* out) {
  out->Reserve(static_cast<int>(in.size()));
  for (const TokenLogprob& t : in) {
    v1::TokenLogprob* m = out->Add();
    m->set_token_id(t.token);
    m->set_logprob(t.logprob);
    m->set_token_bytes(t.bytes);
    for (const TopLogprob& top : t.top) {
      v1::TopLogprob* a = m->add_top_logprobs();
      a->set_token_id(top.token);
      a->set_logprob(top.logprob);
      a->set_token_bytes(top.bytes);
    }
  }
}

}  // namespace

void FillGenerateResponse(const std::string& request_id, const FinalEvent& event,
                          v1::GenerateResponse* out) {
  out->set_request_id(request_id);
  out->set_text(event.text);
  out->mutable_token_ids()->Assign(event.token_ids.begin(), event.token_ids.end());
  out->set_finish_reason(ToProto(event.reason));
  const SequenceStats& s = event.stats;
  out->mutable_usage()->set_prompt_tokens(s.prompt_tokens);
  out->mutable_usage()->set_generated_tokens(s.generated_tokens);
  auto* cache = out->mutable_cache_stats();
  cache->set_steps(s.steps);
  cache->set_full_steps(s.full_steps);
  cache->set_partial_steps(s.partial_steps);
  cache->set_refresh_ratio(s.RefreshRatio());
  cache->set_rows_computed(s.rows_computed);
  cache->set_mean_committed_entropy(s.mean_committed_entropy);
  cache->set_max_committed_entropy(s.max_committed_entropy);
  if (s.tau_switch_step >= 0) cache->set_tau_switch_step(s.tau_switch_step);
  auto* t = out->mutable_timings();
  t->set_queue_seconds(s.queue_seconds);
  t->set_first_commit_seconds(s.first_commit_seconds);
  t->set_total_seconds(s.total_seconds);
  t->set_decision_seconds(s.decision_seconds);
  FillTokenLogprobs(event.logprobs, out->mutable_logprobs());
}

void FillCommittedDelta(const CommitEvent& event, v1::CommittedDelta* out) {
  out->set_step(event.step);
  out->set_text(event.text_delta);
  out->mutable_positions()->Assign(event.positions.begin(), event.positions.end());
  out->mutable_token_ids()->Assign(event.tokens.begin(), event.tokens.end());
  FillTokenLogprobs(event.logprobs, out->mutable_logprobs());
  FillTokenLogprobs(event.text_logprobs, out->mutable_text_logprobs());
}

void FillCanvasSnapshot(const SnapshotEvent& event, v1::CanvasSnapshot* out) {
  out->set_step(event.step);
  out->set_text(event.canvas_text);
}

void FillModelInfo(const ModelInfo& model, BackendKind backend, const RequestDefaults& defaults,
                   const LimitsSection& limits, v1::GetModelInfoResponse* out) {
  out->set_family(model.family);
  out->set_model_dir(model.model_dir);
  out->set_vocab_size(model.vocab_size);
  out->set_hidden_size(model.hidden_size);
  out->set_num_layers(model.num_layers);
  out->set_max_positions(model.max_positions);
  out->set_mask_token_id(model.mask_token_id);
  out->mutable_end_token_ids()->Assign(model.end_token_ids.begin(), model.end_token_ids.end());
  out->set_backend(std::string(BackendName(backend)));
  out->set_default_max_new_tokens(defaults.max_new_tokens);
  WriteProtoParams(defaults.decoding, defaults.cache, out->mutable_default_decoding(),
                   out->mutable_default_cache());
  // The Limits message's fields are the table's rows, by name (tests/server/limit_fields_test.cc).
  auto* l = out->mutable_limits();
  const google::protobuf::Reflection* reflection = l->GetReflection();
  for (const LimitField& f : LimitFields()) {
    const google::protobuf::FieldDescriptor* field =
        l->GetDescriptor()->FindFieldByName(std::string(f.name));
    const double value = LimitValue(limits, f);
    std::visit(
        [&](auto member) {
          using T = std::remove_cvref_t<decltype(limits.*member)>;
          if constexpr (std::is_same_v<T, int>) {
            reflection->SetInt32(l, field, static_cast<int32_t>(value));
          } else if constexpr (std::is_same_v<T, int64_t>) {
            reflection->SetInt64(l, field, static_cast<int64_t>(value));
          } else {
            reflection->SetFloat(l, field, static_cast<float>(value));
          }
        },
        f.member);
  }
  for (CachePolicyKind p : limits.allowed_cache_policies) l->add_allowed_cache_policies(ToProto(p));
}

}  // namespace dllm
