// Engine::Create and the small free functions of engine.h.
#include "engine/engine.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/engine_impl.h"
#include "engine/model/loaded_model.h"

namespace dllm {
const char* FinishReasonName(FinishReason reason) {
  switch (reason) {
    case FinishReason::kLength:
      return "length";
    case FinishReason::kEos:
      return "eos";
    case FinishReason::kCancelled:
      return "cancelled";
    case FinishReason::kDeadline:
      return "deadline";
    case FinishReason::kStepLimit:
      return "step_limit";
    case FinishReason::kError:
      return "error";
  }
  return "unknown";
}

absl::Status ValidateEngineOptions(const EngineOptions& options) {
  if (options.max_batch_sequences < 1) {
    return absl::InvalidArgumentError("max_batch_sequences must be >= 1");
  }
  // Every request passes through the queue, so a zero capacity would refuse everything.
  if (options.queue_capacity < 1) return absl::InvalidArgumentError("queue_capacity must be >= 1");
  if (!(options.tau_switch_slack_ratio >= 0 && options.tau_switch_slack_ratio <= 1000)) {
    return absl::InvalidArgumentError("tau_switch_slack_ratio must be in [0, 1000]");
  }
  if (options.max_new_tokens_limit < 1) {
    return absl::InvalidArgumentError("max_new_tokens_limit must be >= 1");
  }
  if (absl::Status s = ValidateShadowOptions(options.shadow); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("shadow.", s.message()));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Engine>> Engine::Create(const EngineOptions& options) {
  if (options.model_dir.empty()) return absl::InvalidArgumentError("model_dir is empty");
  // Before the load, which takes the time.
  if (absl::Status s = ValidateEngineOptions(options); !s.ok()) return s;
  LoadOptions load;
  load.model_dir = options.model_dir;
  load.backend = options.backend == BackendKind::kCuda ? "cuda" : "cpu";
  load.cpu_threads = options.cpu_threads;
  load.kv_budget_bytes = options.kv_budget_bytes;
  absl::StatusOr<std::unique_ptr<LoadedModel>> model = LoadModel(load);
  if (!model.ok()) return model.status();
  return CreateEngineFromLoadedModel(options, std::move(*model));
}

}  // namespace dllm
