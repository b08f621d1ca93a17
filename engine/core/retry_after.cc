#include "engine/core/retry_after.h"

#include <cstdint>
#include <string>

#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace dllm {
namespace {

// The payload's type URL and value (whole milliseconds, decimal).
constexpr char kRetryAfterUrl[] = "type.dllm.dev/retry-after-ms";

}  // namespace

std::optional<absl::Duration> RetryAfter(const absl::Status& status) {
  const auto payload = status.GetPayload(kRetryAfterUrl);
  int64_t ms = 0;
  if (!payload.has_value() || !absl::SimpleAtoi(std::string(*payload), &ms) || ms < 0) {
    return std::nullopt;
  }
  return absl::Milliseconds(ms);
}

void SetRetryAfter(absl::Duration wait, absl::Status* status) {
  const int64_t ms = absl::ToInt64Milliseconds(absl::Ceil(wait, absl::Milliseconds(1)));
  status->SetPayload(kRetryAfterUrl, absl::Cord(absl::StrCat(ms < 0 ? 0 : ms)));
}

}  // namespace dllm
