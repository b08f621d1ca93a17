#include "server/warmup.h"

#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"

namespace dllm {
namespace {

class WarmupSink : public EventSink {
 public:
  void OnCommit(const CommitEvent&) override {}
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

 private:
  absl::Notification done_;
  absl::Status status_;  // written before Notify, read after it
};

}  // namespace

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
  return sink->Wait(timeout + absl::Seconds(5));
}

}  // namespace dllm
