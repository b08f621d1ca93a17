// RefusalStatus: a refused call is counted as what its client saw.
#include "server/refusal_status.h"

#include <catch2/catch.hpp>

#include "server/engine_request_link.h"

namespace dllm {
namespace {

const absl::Time kDeadline = absl::FromUnixSeconds(1000);
const absl::Status kBadRequest = absl::InvalidArgumentError("input: empty");

TEST_CASE("RefusalStatus: a live call keeps the refusal") {
  CHECK(RefusalStatus(kDeadline - absl::Seconds(1), kDeadline, false, true, kBadRequest) ==
        kBadRequest);
  CHECK(RefusalStatus(kDeadline, absl::InfiniteFuture(), false, true, kBadRequest) == kBadRequest);
}

TEST_CASE("RefusalStatus: a call past its deadline is DEADLINE_EXCEEDED") {
  // Live or cancelled: the client's deadline has passed too.
  for (bool cancelled : {false, true}) {
    CHECK(absl::IsDeadlineExceeded(
        RefusalStatus(kDeadline, kDeadline, cancelled, true, kBadRequest)));
    CHECK(absl::IsDeadlineExceeded(
        RefusalStatus(kDeadline + absl::Seconds(1), kDeadline, cancelled, true, kBadRequest)));
  }
}

TEST_CASE("RefusalStatus: a cancellation within the slack is the client's deadline") {
  const absl::Time now = kDeadline - EngineRequestLink::kDeadlineSlack / 2;
  CHECK(absl::IsDeadlineExceeded(RefusalStatus(now, kDeadline, true, true, kBadRequest)));
  // Not cancelled: the call is live and the refusal stands.
  CHECK(RefusalStatus(now, kDeadline, false, true, kBadRequest) == kBadRequest);
}

TEST_CASE("RefusalStatus: an earlier cancellation is CANCELLED") {
  const absl::Time now = kDeadline - 2 * EngineRequestLink::kDeadlineSlack;
  CHECK(absl::IsCancelled(RefusalStatus(now, kDeadline, true, true, kBadRequest)));
  CHECK(absl::IsCancelled(RefusalStatus(now, absl::InfiniteFuture(), true, true,
                                        absl::ResourceExhaustedError("queue is full"))));
}

TEST_CASE("RefusalStatus: a call without its message near its deadline is DEADLINE_EXCEEDED") {
  // The client gave up before sending it; gRPC may not report the cancellation yet.
  const absl::Time near = kDeadline - EngineRequestLink::kDeadlineSlack / 2;
  CHECK(absl::IsDeadlineExceeded(RefusalStatus(near, kDeadline, false, false, kBadRequest)));
  // Far from any deadline the client may still be there: the refusal stands, unless gRPC
  // reported a cancellation.
  const absl::Time far = kDeadline - 2 * EngineRequestLink::kDeadlineSlack;
  CHECK(RefusalStatus(far, kDeadline, false, false, kBadRequest) == kBadRequest);
  CHECK(RefusalStatus(far, absl::InfiniteFuture(), false, false, kBadRequest) == kBadRequest);
  CHECK(absl::IsCancelled(RefusalStatus(far, kDeadline, true, false, kBadRequest)));
}

}  // namespace
}  // namespace dllm
