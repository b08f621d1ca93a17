#include "server/gateway.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "engine/tokenizer/tokenizer.h"
#include "server/request_mapping.h"
#include "server/response_mapping.h"

namespace dllm {
namespace {

// The metrics and log label of a status: the canonical code's name ("OK",
// "INVALID_ARGUMENT", ...), which is also the gRPC code's name.
std::string CodeLabel(const absl::Status& status) {
  std::string name = absl::StatusCodeToString(status.code());
  return name.empty() ? "INTERNAL" : name;  // a non-canonical code, mapped as such
}

}  // namespace

Gateway::Gateway(const ServerConfig& config, const TokenAuthenticator* auth, ServerMetrics* metrics,
                 Logger* logger)
    : config_(config),
      auth_(auth),
      metrics_(metrics),
      logger_(logger),
      rejected_log_(kRejectedLogLinesPerSecond),
      limits_(config.limits) {}

Gateway::~Gateway() { WaitForOpenCalls(absl::Seconds(10)); }

absl::Status Gateway::AttachEngine(Engine* engine) {
  RequestDefaults defaults =
      ResolveRequestDefaults(engine->model_info(), config_.decoding, config_.cache);
  v1::GenerateRequest probe;
  probe.set_prompt("x");
  absl::StatusOr<GenerationRequest> mapped =
      ToGenerationRequest(probe, defaults, config_.limits, engine->model_info());
  if (!mapped.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("the default request violates the configured limits (set the default in "
                     "the config's decoding:/cache: section or raise the limit): ",
                     mapped.status().message()));
  }
  absl::MutexLock lock(&mu_);
  engine_ = engine;
  defaults_ = defaults;
  limits_.max_prompt_bytes = EffectiveMaxPromptBytes(config_.limits, engine->model_info());
  return absl::OkStatus();
}

void Gateway::SetLameDuck() {
  absl::MutexLock lock(&mu_);
  lame_duck_ = true;
}

void Gateway::SetDraining() {
  absl::MutexLock lock(&mu_);
  draining_ = true;
}

void Gateway::CallOpened() {
  absl::MutexLock lock(&mu_);
  ++open_calls_;
}

void Gateway::CallClosed() {
  absl::MutexLock lock(&mu_);
  --open_calls_;
}

bool Gateway::WaitForOpenCalls(absl::Duration timeout) const {
  absl::MutexLock lock(&mu_);
  auto none = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return open_calls_ == 0; };
  return mu_.AwaitWithTimeout(absl::Condition(&none), timeout);
}

bool Gateway::Serving() const {
  absl::MutexLock lock(&mu_);
  return engine_ != nullptr && !draining_ && !lame_duck_;
}

absl::Status Gateway::CheckAvailable(std::optional<std::string_view> authorization,
                                     Engine** engine) const {
  if (absl::Status st = auth_->Check(authorization); !st.ok()) return st;
  return Available(engine);
}

absl::Status Gateway::Available(Engine** engine) const {
  absl::MutexLock lock(&mu_);
  if (draining_) return absl::UnavailableError("server is shutting down");
  if (engine_ == nullptr) return absl::UnavailableError("model is loading");
  *engine = engine_;
  return absl::OkStatus();
}

std::string Gateway::LogId(const v1::GenerateRequest& request) {
  const std::string& id = request.request_id();
  bool usable = !id.empty() && id.size() <= 128;
  for (unsigned char c : id) usable &= (c >= 0x21 && c <= 0x7e);
  if (usable) return id;
  return absl::StrCat("req-", next_id_.fetch_add(1, std::memory_order_relaxed));
}

absl::StatusOr<Gateway::Admitted> Gateway::Admit(TokenCheck token_check,
                                                 std::optional<std::string_view> authorization,
                                                 absl::Time deadline,
                                                 const v1::GenerateRequest& request,
                                                 const std::string& request_id) {
  Admitted out;
  if (absl::Status st = token_check == TokenCheck::kCheck
                            ? CheckAvailable(authorization, &out.engine)
                            : Available(&out.engine);
      !st.ok()) {
    return st;
  }
  RequestDefaults defaults;
  LimitsSection limits;
  {
    absl::MutexLock lock(&mu_);
    defaults = defaults_;
    limits = limits_;
  }
  absl::StatusOr<GenerationRequest> mapped =
      ToGenerationRequest(request, defaults, limits, out.engine->model_info());
  if (!mapped.ok()) return mapped.status();
  out.request = *std::move(mapped);
  // Tokenize here once so that the prompt-length limit can be checked before queueing;
  // the engine then uses the ids verbatim.
  if (out.request.prompt_ids.empty()) {
    absl::StatusOr<std::vector<int32_t>> ids = out.engine->TokenizeInput(out.request);
    if (!ids.ok()) return ids.status();
    if (absl::Status st = CheckPromptLength(ids->size(), config_.limits); !st.ok()) return st;
    out.request.prompt_ids = *std::move(ids);
    out.request.prompt_text.reset();
    out.request.messages.clear();
  }
  out.request.id = request_id;
  out.request.deadline = deadline;
  return out;
}

absl::Status Gateway::FinalStatus(const FinalEvent& event, const EngineRequestLink& link) const {
  const bool client_cancelled = link.cancelled();
  if (event.reason == FinishReason::kCancelled && client_cancelled &&
      link.cancelled_by_deadline()) {
    return absl::DeadlineExceededError("deadline exceeded during generation");
  }
  if (event.reason == FinishReason::kCancelled && !client_cancelled) {
    absl::MutexLock lock(&mu_);
    if (draining_) {
      return absl::UnavailableError("server shut down before the request finished (drain timeout)");
    }
  }
  if (event.reason == FinishReason::kDeadline && event.status.ok()) {
    return absl::DeadlineExceededError("deadline exceeded during generation");
  }
  if (event.reason == FinishReason::kCancelled && event.status.ok()) {
    return absl::CancelledError("request cancelled");
  }
  return event.status;
}

void Gateway::RecordCall(const char* method, const std::string& request_id,
                         const absl::Status& status, const FinalEvent* event, absl::Time start,
                         const char* protocol) {
  const std::string code = CodeLabel(status);
  if (metrics_ != nullptr) metrics_->CountRequest(code, protocol);
  // Calls rejected before they ran (queue full, bad token, bad field, draining) can come in
  // storms; their log lines are rate-limited (the metric above still counts every one).
  int64_t suppressed = 0;
  if (event == nullptr && !status.ok() && !rejected_log_.Admit(absl::Now(), &suppressed)) return;
  LogFields fields = {
      {"id", request_id},
      {"method", std::string(method)},
      {"protocol", std::string(protocol)},
      {"status", code},
  };
  if (event != nullptr) {
    const SequenceStats& s = event->stats;
    fields.push_back({"finish_reason", std::string(FinishReasonName(event->reason))});
    fields.push_back({"prompt_tokens", int64_t{s.prompt_tokens}});
    fields.push_back({"generated_tokens", int64_t{s.generated_tokens}});
    fields.push_back({"steps", int64_t{s.steps}});
    fields.push_back({"full_steps", int64_t{s.full_steps}});
    fields.push_back({"refresh_ratio", s.RefreshRatio()});
    fields.push_back({"queue_ms", s.queue_seconds * 1e3});
  }
  fields.push_back({"latency_ms", absl::ToDoubleMilliseconds(absl::Now() - start)});
  if (!status.ok()) fields.push_back({"error", std::string(status.message())});
  if (suppressed > 0) fields.push_back({"similar_lines_suppressed", suppressed});
  logger_->Log(status.ok() ? LogLevel::kInfo : LogLevel::kWarning, "request_done", fields);
}

absl::StatusOr<v1::TokenizeResponse> Gateway::Tokenize(Engine* engine,
                                                       const v1::TokenizeRequest& request) const {
  LimitsSection limits;
  {
    absl::MutexLock lock(&mu_);
    limits = limits_;
  }
  // Bounded before tokenizing: a 4 MB prompt would otherwise be tokenized (and its ids,
  // bytes and rendering built) in full.
  absl::StatusOr<GenerationRequest> mapped = ToTokenizeRequest(request, limits);
  if (!mapped.ok()) return mapped.status();
  absl::StatusOr<std::vector<int32_t>> ids = engine->TokenizeInput(*mapped);
  if (!ids.ok()) return ids.status();
  const Tokenizer& tokenizer = engine->tokenizer();
  v1::TokenizeResponse response;
  response.mutable_token_ids()->Assign(ids->begin(), ids->end());
  for (int32_t id : *ids) response.add_token_bytes(tokenizer.TokenBytes(id));
  response.set_rendered(tokenizer.Decode(*ids, /*skip_special=*/false));
  return response;
}

absl::Status Gateway::CheckReplySize(const google::protobuf::Message& reply) const {
  const size_t bytes = reply.ByteSizeLong();
  if (bytes > static_cast<size_t>(config_.server.max_send_message_bytes)) {
    return absl::ResourceExhaustedError(absl::StrCat("the reply is ", bytes,
                                                     " bytes, over server.max_send_message_bytes (",
                                                     config_.server.max_send_message_bytes, ")"));
  }
  return absl::OkStatus();
}

absl::Status Gateway::DescribeModel(std::optional<std::string_view> authorization,
                                    v1::GetModelInfoResponse* out) const {
  Engine* engine = nullptr;
  if (absl::Status st = CheckAvailable(authorization, &engine); !st.ok()) return st;
  RequestDefaults defaults;
  LimitsSection limits;
  {
    absl::MutexLock lock(&mu_);
    defaults = defaults_;
    limits = limits_;
  }
  FillModelInfo(engine->model_info(), config_.engine.backend, defaults, limits, out);
  return absl::OkStatus();
}

}  // namespace dllm
