// The worker's queue: requests whose deadline passed, or that their caller cancelled, must not
// hold queue slots (the hostile probe's defect 5). The worker is parked inside a step
// (BlockingSink) so that the queue's content is fully determined by the test while it runs.
#include <catch2/catch.hpp>

#include "absl/synchronization/notification.h"
#include "engine/engine_impl.h"
#include "tests/engine/scheduler/collect_sink.h"
#include "tests/support/fake_executor.h"

namespace dllm {
namespace {

using testing::BlockingSink;
using testing::CollectSink;

struct Harness {
  explicit Harness(const EngineOptions& options) {
    auto executor = std::make_unique<testing::FakeExecutor>(options.kv_budget_bytes);
    auto created = CreateEngineForTesting(options, testing::FakeConfig(false), std::move(executor),
                                          std::make_unique<testing::FakeTokenizer>());
    REQUIRE(created.ok());
    engine = std::move(*created);
  }
  std::unique_ptr<Engine> engine;
};

GenerationRequest Request(absl::Time deadline = absl::InfiniteFuture()) {
  GenerationRequest r;
  r.prompt_ids = {20, 21, 22};
  r.max_new_tokens = 8;
  r.decoding.block_length = 8;
  r.deadline = deadline;
  return r;
}

TEST_CASE("worker queue: expired queued requests give up their slots at once",
          "[scheduler][queue][reliability]") {
  EngineOptions options;
  options.max_batch_sequences = 1;
  options.queue_capacity = 2;
  Harness h(options);
  absl::Notification entered, release;
  auto blocker = BlockingSink(&entered, &release);
  REQUIRE(h.engine->Submit(Request(), blocker).ok());
  entered.WaitForNotification();  // the worker is parked in step 0; the queue is empty

  // Fill the queue with requests that expire while the worker is still parked.
  const absl::Time soon = absl::Now() + absl::Milliseconds(20);
  std::vector<std::shared_ptr<CollectSink>> expiring;
  for (int i = 0; i < 2; ++i) {
    expiring.push_back(std::make_shared<CollectSink>());
    REQUIRE(h.engine->Submit(Request(soon), expiring.back()).ok());
  }
  absl::SleepFor(soon - absl::Now() + absl::Milliseconds(5));

  // The queue is "full" of expired requests: new ones must still be accepted (was
  // RESOURCE_EXHAUSTED until the next step).
  std::vector<std::shared_ptr<CollectSink>> fresh;
  for (int i = 0; i < 2; ++i) {
    fresh.push_back(std::make_shared<CollectSink>());
    auto id = h.engine->Submit(Request(), fresh.back());
    CHECK(id.ok());
  }
  // Now the queue really is full.
  auto rejected = h.engine->Submit(Request(), std::make_shared<CollectSink>());
  CHECK(absl::IsResourceExhausted(rejected.status()));

  release.Notify();
  CHECK(blocker->Wait().status.ok());
  for (auto& s : expiring) {
    const FinalEvent final = s->Wait();
    CHECK(final.reason == FinishReason::kDeadline);
    CHECK(absl::IsDeadlineExceeded(final.status));
    CHECK(s->finals() == 1);
    CHECK(s->commits().empty());
  }
  for (auto& s : fresh) {
    CHECK(s->Wait().status.ok());
    CHECK(s->finals() == 1);
  }
}

TEST_CASE("worker queue: a caller-cancelled queued request frees its slot for a full queue",
          "[scheduler][queue][reliability]") {
  EngineOptions options;
  options.max_batch_sequences = 1;
  options.queue_capacity = 1;
  Harness h(options);
  absl::Notification entered, release;
  auto blocker = BlockingSink(&entered, &release);
  REQUIRE(h.engine->Submit(Request(), blocker).ok());
  entered.WaitForNotification();
  auto cancelled = std::make_shared<CollectSink>();
  auto id = h.engine->Submit(Request(), cancelled);
  REQUIRE(id.ok());
  h.engine->Cancel(*id);
  auto next = std::make_shared<CollectSink>();
  CHECK(h.engine->Submit(Request(), next).ok());
  release.Notify();
  const FinalEvent final = cancelled->Wait();
  CHECK(final.reason == FinishReason::kCancelled);
  CHECK(next->Wait().status.ok());
  CHECK(cancelled->finals() == 1);
}

}  // namespace
}  // namespace dllm
