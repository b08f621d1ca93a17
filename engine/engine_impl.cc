#include "engine/engine_impl.h"

#include <algorithm>
#include <atomic>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/core/status_macros.h"
#include "engine/decoding/cache_policy.h"
#include "engine/model/loaded_model.h"
#include "engine/model/step_flops.h"
#include "engine/scheduler/worker.h"
#include "engine/tokenizer/chat_template.h"

namespace dllm {

DecodingParams DefaultDecodingParams(ModelFamily family) {
  // The other schedules' knobs (block_length 32, eps 1e-3, steps 0) are DecodingParams'
  // defaults; the family picks the schedule, its window, the threshold and the ranking.
  const ModelFamilyInfo& f = FamilyInfo(family);
  DecodingParams p;
  p.schedule = f.default_schedule;
  p.window = f.default_window;
  p.confidence_threshold = f.default_confidence_threshold;
  p.remasking = f.default_remasking;
  return p;
}

ModelInfo MakeModelInfo(const ModelConfig& config, const std::string& model_dir,
                        const GenerationDefaults& generation) {
  ModelInfo info;
  info.family = FamilyInfo(config.family).model_type;
  info.model_dir = model_dir;
  info.vocab_size = config.vocab_size;
  info.hidden_size = config.hidden_size;
  info.num_layers = config.num_layers;
  info.max_positions = config.max_positions;
  info.mask_token_id = config.mask_token_id;
  for (int32_t id : {config.eos_token_id, config.eot_token_id}) {
    if (id >= 0 && std::find(info.end_token_ids.begin(), info.end_token_ids.end(), id) ==
                       info.end_token_ids.end()) {
      info.end_token_ids.push_back(id);
    }
  }
  info.default_decoding = DefaultDecodingParams(config.family);
  // The product's point: serve with EntropyCache unless a request or the operator says
  // otherwise, at the family's tuned knobs.
  info.default_cache.policy = CachePolicyKind::kEntropy;
  info.default_cache.entropy_threshold = FamilyInfo(config.family).default_tau_nats;
  info.default_cache.recent_k = FamilyInfo(config.family).default_recent_k;
  info.default_cache.entropy_threshold_under_load =
      FamilyInfo(config.family).default_tau_under_load_nats;
  if (generation.max_new_tokens) info.default_max_new_tokens = *generation.max_new_tokens;
  info.row_macs = LayerMatmulParams(config) * config.num_layers;
  info.key_macs = (StepFlops(config, 1, 1, 0) - StepFlops(config, 1, 0, 0)) / 2;
  info.lm_head_macs = StepFlops(config, 0, 0, 1) / 2;
  return info;
}

namespace {

class EngineImpl final : public Engine {
 public:
  EngineImpl(const EngineOptions& options, const ModelConfig& config,
             std::unique_ptr<LoadedModel> model, std::unique_ptr<StepExecutor> executor,
             std::unique_ptr<Tokenizer> owned_tokenizer, const Tokenizer* tokenizer)
      : options_(options),
        config_(config),
        info_(MakeModelInfo(config, options.model_dir,
                            model ? model->generation : GenerationDefaults{})),
        model_(std::move(model)),
        executor_(std::move(executor)),
        owned_tokenizer_(std::move(owned_tokenizer)),
        tokenizer_(tokenizer),
        clock_(options.clock != nullptr ? options.clock : &SystemClock()) {
    WorkerOptions worker;
    worker.max_batch_sequences = std::max(1, options.max_batch_sequences);
    worker.queue_capacity = std::max(0, options.queue_capacity);
    worker.refuse_late_requests = options.refuse_late_requests;
    worker.tau_switch_slack_ratio = options.tau_switch_slack_ratio;
    worker.context.tokenizer = tokenizer_;
    worker.context.mask_token_id = config.mask_token_id;
    worker.context.vocab_size = config.vocab_size;
    worker.context.end_token_ids = info_.end_token_ids;
    worker.context.shift_logits = config.shift_logits;
    worker.observer = options.observer;
    worker.shadow = options.shadow;
    worker.context.clock = clock_;
    worker_ = std::make_unique<Worker>(std::move(worker), executor_.get());
  }

  ~EngineImpl() override { worker_.reset(); }

  absl::StatusOr<RequestId> Submit(GenerationRequest request,
                                   std::shared_ptr<EventSink> sink) override {
    if (sink == nullptr) return absl::InvalidArgumentError("sink must not be null");
    absl::StatusOr<std::vector<int32_t>> ids = TokenizeInput(request);
    if (!ids.ok()) return ids.status();
    std::vector<int32_t> suffix =
        request.suffix.empty() ? request.suffix_ids : tokenizer_->Encode(request.suffix);
    if (absl::Status s = Validate(request, *ids, suffix); !s.ok()) return s;
    PendingRequest pending;
    pending.id = next_id_.fetch_add(1) + 1;
    pending.prompt_ids = std::move(*ids);
    pending.suffix_ids = std::move(suffix);
    pending.request = std::move(request);
    pending.sink = std::move(sink);
    pending.submit_time = clock_->Now();
    const RequestId id = pending.id;
    if (absl::Status s = worker_->Enqueue(std::move(pending)); !s.ok()) return s;
    return id;
  }

  void Cancel(RequestId id) override { worker_->Cancel(id); }
  void Drain(absl::Duration timeout) override { worker_->Drain(timeout); }
  const ModelInfo& model_info() const override { return info_; }
  const Tokenizer& tokenizer() const override { return *tokenizer_; }

  absl::StatusOr<std::vector<int32_t>> TokenizeInput(
      const GenerationRequest& request) const override {
    std::vector<int32_t> ids;
    if (request.prompt_text.has_value()) {
      ids = tokenizer_->Encode(*request.prompt_text);
    } else if (!request.messages.empty()) {
      absl::StatusOr<RenderedChat> chat = RenderChat(config_.family, request.messages);
      if (!chat.ok()) return chat.status();
      ids = tokenizer_->Encode(chat->text, chat->content);
    } else if (!request.prompt_ids.empty()) {
      ids = request.prompt_ids;
    } else {
      return absl::InvalidArgumentError(
          "request has no input: set prompt_text, messages or prompt_ids");
    }
    if (ids.empty()) return absl::InvalidArgumentError("prompt tokenizes to zero tokens");
    return ids;
  }

 private:
  // INVALID_ARGUMENT "<name>[i] = id is outside the vocabulary [0, V)" for the first bad id.
  absl::Status CheckInVocabulary(const char* name, const std::vector<int32_t>& ids) const {
    for (size_t i = 0; i < ids.size(); ++i) {
      if (ids[i] < 0 || ids[i] >= config_.vocab_size) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "%s[%d] = %d is outside the vocabulary [0, %d)", name, i, ids[i], config_.vocab_size));
      }
    }
    return absl::OkStatus();
  }

  absl::Status Validate(const GenerationRequest& r, const std::vector<int32_t>& ids,
                        const std::vector<int32_t>& suffix) const {
    const int gen = r.max_new_tokens;
    ParamLimits limits;
    limits.max_new_tokens = options_.max_new_tokens_limit;
    limits.vocab_size = config_.vocab_size;
    if (absl::Status s = ValidateParams(gen, r.decoding, r.cache, limits); !s.ok()) return s;
    if (r.logprobs.has_value() && (*r.logprobs < 0 || *r.logprobs > kMaxTopLogprobs)) {
      return absl::InvalidArgumentError(
          absl::StrFormat("logprobs: %d is outside [0, %d]", *r.logprobs, kMaxTopLogprobs));
    }
    const int64_t total = static_cast<int64_t>(ids.size() + suffix.size()) + gen;
    if (total > config_.max_positions) {
      return absl::InvalidArgumentError(
          suffix.empty()
              ? absl::StrFormat("prompt tokens (%d) + max_new_tokens (%d) = %d exceeds the model's "
                                "max positions (%d)",
                                ids.size(), gen, total, config_.max_positions)
              : absl::StrFormat("prompt tokens (%d) + max_new_tokens (%d) + suffix tokens (%d) = "
                                "%d exceeds the model's max positions (%d)",
                                ids.size(), gen, suffix.size(), total, config_.max_positions));
    }
    if (!r.canvas.empty()) {
      if (static_cast<int>(r.canvas.size()) != gen) {
        return absl::InvalidArgumentError(
            absl::StrFormat("canvas: %d tokens, but max_new_tokens is %d (it must equal the "
                            "canvas length)",
                            r.canvas.size(), gen));
      }
      DLLM_RETURN_IF_ERROR(CheckInVocabulary("canvas", r.canvas));
      const auto first_mask = std::find(r.canvas.begin(), r.canvas.end(), config_.mask_token_id);
      if (first_mask == r.canvas.end()) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "canvas: no position to generate (mark them with the mask token, id %d)",
            config_.mask_token_id));
      }
      // The answer ends at its first end token, so one fixed before every mask leaves nothing
      // to generate (and the decoder would finish before its first step).
      const std::vector<int32_t>& ends = info_.end_token_ids;
      const auto end = std::find_first_of(r.canvas.begin(), first_mask, ends.begin(), ends.end());
      if (end != first_mask) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "canvas: token %d is an end token (id %d) before the first mask (token %d): the "
            "answer would end there with nothing to generate",
            end - r.canvas.begin(), *end, first_mask - r.canvas.begin()));
      }
    }
    DLLM_RETURN_IF_ERROR(CheckInVocabulary("suffix_ids", suffix));
    for (size_t i = 0; i < suffix.size(); ++i) {
      if (suffix[i] == config_.mask_token_id) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "suffix: token %d is the mask token (id %d); the suffix is fixed text", i, suffix[i]));
      }
    }
    DLLM_RETURN_IF_ERROR(CheckInVocabulary("prompt_ids", ids));
    for (size_t i = 0; i < ids.size(); ++i) {
      if (ids[i] == config_.mask_token_id) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "prompt: token %d is the mask token (id %d); to infill, send the text after the gap "
            "as the suffix (chat content is always read as text)",
            i, ids[i]));
      }
    }
    if (r.snapshot_every_steps < 0) {
      return absl::InvalidArgumentError(
          absl::StrFormat("snapshot_every_steps (%d) must be >= 0", r.snapshot_every_steps));
    }
    if ((r.cache.policy == CachePolicyKind::kD2Cache ||
         r.cache.policy == CachePolicyKind::kElastic) &&
        !executor_->ComputesAttentionMaps()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "cache.policy ", Name(r.cache.policy),
          " decides from attention maps, which this server's backend does not compute (the cpu "
          "and cuda backends do); choose another cache policy"));
    }
    const int64_t bytes = executor_->KvBytesFor(static_cast<int>(total), r.cache);
    if (bytes > executor_->KvBudgetBytes()) {
      // Never fits, however idle the server: a client error (400), not overload (429, which
      // clients retry).
      const bool maps = PolicyStateBytes(r.cache, 1, 1) > 0;
      return absl::InvalidArgumentError(absl::StrFormat(
          "max_new_tokens: the prompt (%d tokens) and the answer (%d) need %d bytes of KV "
          "memory%s, more than the whole KV budget of %d bytes (engine.kv_budget_bytes); "
          "shorten either%s",
          static_cast<int64_t>(ids.size()), gen, bytes,
          maps ? absl::StrCat(" (with the attention maps that cache.policy ", Name(r.cache.policy),
                              " keeps: layers x positions^2 floats)")
               : std::string(),
          executor_->KvBudgetBytes(), maps ? ", or choose another cache policy" : ""));
    }
    return absl::OkStatus();
  }

  const EngineOptions options_;
  const ModelConfig config_;
  const ModelInfo info_;
  std::unique_ptr<LoadedModel> model_;  // null in tests
  std::unique_ptr<StepExecutor> executor_;
  std::unique_ptr<Tokenizer> owned_tokenizer_;
  const Tokenizer* tokenizer_;
  const Clock* const clock_;
  std::atomic<RequestId> next_id_{0};
  std::unique_ptr<Worker> worker_;  // last: its thread stops before the rest is destroyed
};

}  // namespace

absl::StatusOr<std::unique_ptr<Engine>> CreateEngineForTesting(
    const EngineOptions& options, const ModelConfig& config, std::unique_ptr<StepExecutor> executor,
    std::unique_ptr<Tokenizer> tokenizer) {
  if (executor == nullptr || tokenizer == nullptr) {
    return absl::InvalidArgumentError("executor and tokenizer are required");
  }
  const Tokenizer* t = tokenizer.get();
  return std::unique_ptr<Engine>(
      new EngineImpl(options, config, nullptr, std::move(executor), std::move(tokenizer), t));
}

absl::StatusOr<std::unique_ptr<Engine>> CreateEngineFromLoadedModel(
    const EngineOptions& options, std::unique_ptr<LoadedModel> model,
    std::unique_ptr<StepExecutor> executor) {
  if (absl::Status s = ValidateEngineOptions(options); !s.ok()) return s;
  if (executor == nullptr) {
    executor = MakeTransformerExecutor(model->transformer.get(), model->kv_pool.get());
  }
  const Tokenizer* tokenizer = model->tokenizer.get();
  const ModelConfig config = model->config;
  return std::unique_ptr<Engine>(
      new EngineImpl(options, config, std::move(model), std::move(executor), nullptr, tokenizer));
}

}  // namespace dllm
