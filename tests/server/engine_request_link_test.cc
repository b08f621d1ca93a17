// EngineRequestLink: which cancellations reach the engine, and how they are classified.
#include "server/engine_request_link.h"

#include <catch2/catch.hpp>

#include "absl/time/clock.h"
#include "tests/support/scripted_engine.h"

namespace dllm {
namespace {

using testing::ScriptedEngine;

GenerationRequest LongRequest() {
  GenerationRequest request;
  request.prompt_ids = {testing::ByteToken('a'), testing::ByteToken('b')};
  request.max_new_tokens = 2048;  // ~2 s at 1 ms per step: still running when cancelled
  return request;
}

class NullSink : public EventSink {
 public:
  void OnCommit(const CommitEvent&) override {}
  void OnFinal(const FinalEvent&) override {}
};

TEST_CASE("EngineRequestLink: a cancel well before the deadline reaches the engine") {
  ScriptedEngine engine;
  EngineRequestLink link;
  absl::StatusOr<RequestId> id = engine.Submit(LongRequest(), std::make_shared<NullSink>());
  REQUIRE(id.ok());
  link.Bind(&engine, *id, absl::Now() + absl::Seconds(30));
  link.Cancel();
  CHECK(engine.cancel_calls() == 1);
  CHECK(link.cancelled());
  CHECK_FALSE(link.cancelled_by_deadline());
}

TEST_CASE("EngineRequestLink: a cancel without a deadline reaches the engine") {
  ScriptedEngine engine;
  EngineRequestLink link;
  absl::StatusOr<RequestId> id = engine.Submit(LongRequest(), std::make_shared<NullSink>());
  REQUIRE(id.ok());
  link.Bind(&engine, *id, absl::InfiniteFuture());
  link.Cancel();
  CHECK(engine.cancel_calls() == 1);
  CHECK_FALSE(link.cancelled_by_deadline());
}

TEST_CASE("EngineRequestLink: a cancel before Bind is forwarded at Bind") {
  ScriptedEngine engine;
  EngineRequestLink link;
  link.Cancel();
  absl::StatusOr<RequestId> id = engine.Submit(LongRequest(), std::make_shared<NullSink>());
  REQUIRE(id.ok());
  CHECK(engine.cancel_calls() == 0);
  link.Bind(&engine, *id, absl::Now() + absl::Seconds(30));
  CHECK(engine.cancel_calls() == 1);
}

TEST_CASE("EngineRequestLink: the deadline's own cancel is left to the engine") {
  // The client's deadline timer fires just before the server's: within the slack the
  // cancellation is the deadline's, and the engine must end the request as `deadline`.
  for (absl::Duration before :
       {absl::Milliseconds(50), absl::ZeroDuration(), -absl::Milliseconds(20)}) {
    ScriptedEngine engine;
    EngineRequestLink link;
    absl::StatusOr<RequestId> id = engine.Submit(LongRequest(), std::make_shared<NullSink>());
    REQUIRE(id.ok());
    link.Bind(&engine, *id, absl::Now() + before);
    link.Cancel();
    CHECK(engine.cancel_calls() == 0);
    CHECK(link.cancelled_by_deadline());
  }
}

TEST_CASE("EngineRequestLink: ForwardsCancel draws the line at the slack") {
  const absl::Time deadline = absl::FromUnixSeconds(1000);
  const absl::Duration slack = EngineRequestLink::kDeadlineSlack;
  CHECK(EngineRequestLink::ForwardsCancel(deadline - slack - absl::Milliseconds(1), deadline));
  CHECK_FALSE(EngineRequestLink::ForwardsCancel(deadline - slack, deadline));
  CHECK_FALSE(EngineRequestLink::ForwardsCancel(deadline, deadline));
  CHECK(EngineRequestLink::ForwardsCancel(deadline, absl::InfiniteFuture()));
}

}  // namespace
}  // namespace dllm
