#include "server/warmup.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"

namespace dllm {
namespace {

class WarmupSink : public EventSink {
 public:
  void OnCommit(const CommitEvent& event) override {
    entropy_nats_.insert(entropy_nats_.end(), event.entropy_nats.begin(), event.entropy_nats.end());
  }
  void OnFinal(const FinalEvent& event) override {
    status_ = event.status;
    if (status_.ok() && event.reason != FinishReason::kLength &&
        event.reason != FinishReason::kEos) {
      status_ = absl::InternalError("warm-up generation did not finish normally");
    }
    done_.Notify();
  }
  absl::Status Wait(absl::Duration timeout) {
    if (!done_.WaitForNotificationWithTimeout(timeout)) {
      return absl::DeadlineExceededError(
          absl::StrCat("warm-up generation did not finish within ", absl::FormatDuration(timeout)));
    }
    return status_;
  }
  // Valid after Wait() returned OK (the engine calls OnCommit before OnFinal).
  const std::vector<float>& entropy_nats() const { return entropy_nats_; }

 private:
  absl::Notification done_;
  absl::Status status_;              // written before Notify, read after it
  std::vector<float> entropy_nats_;  // likewise
};

}  // namespace

absl::Status CheckWarmupOutput(int vocab_size, std::span<const float> committed_entropy_nats) {
  if (committed_entropy_nats.empty()) {
    return absl::InternalError("warm-up: the generation committed no tokens");
  }
  const double max_entropy_nats = std::log(static_cast<double>(std::max(vocab_size, 1)));
  // One informative distribution is enough: only all of them being uniform is degenerate.
  double max_gap_nats = -INFINITY;
  for (float entropy : committed_entropy_nats) {
    if (!std::isfinite(entropy)) {
      return absl::DataLossError(
          "warm-up: the model's output is degenerate: a predicted distribution has non-finite "
          "entropy (NaN or Inf logits): the weights are corrupt");
    }
    max_gap_nats = std::max(max_gap_nats, max_entropy_nats - entropy);
  }
  if (max_gap_nats < kWarmupUniformGapNats) {
    return absl::DataLossError(absl::StrCat(
        "warm-up: the model's output is degenerate: every predicted distribution is uniform "
        "over the ",
        vocab_size, "-token vocabulary (", committed_entropy_nats.size(),
        " committed tokens, entropy within ", std::max(max_gap_nats, 0.0), " nats of ln(",
        vocab_size,
        ")): the weights are all zero or carry no model (was the checkpoint overwritten while "
        "the server loaded it?)"));
  }
  return absl::OkStatus();
}

absl::Status RunWarmup(Engine& engine, absl::Duration timeout) {
  GenerationRequest request;
  request.id = "warmup";
  request.prompt_text = "Hello";
  request.max_new_tokens = 4;
  request.decoding = engine.model_info().default_decoding;
  request.decoding.steps = 4;
  request.decoding.block_length = 4;
  request.decoding.window = 4;
  request.cache = engine.model_info().default_cache;
  request.deadline = absl::Now() + timeout;
  auto sink = std::make_shared<WarmupSink>();
  absl::StatusOr<RequestId> id = engine.Submit(request, sink);
  if (!id.ok()) return id.status();
  if (absl::Status done = sink->Wait(timeout + absl::Seconds(5)); !done.ok()) return done;
  return CheckWarmupOutput(engine.model_info().vocab_size, sink->entropy_nats());
}

}  // namespace dllm
