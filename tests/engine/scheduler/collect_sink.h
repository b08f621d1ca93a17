// A thread-safe EventSink that records everything, for engine tests.
#ifndef DLLM_TESTS_ENGINE_SCHEDULER_COLLECT_SINK_H_
#define DLLM_TESTS_ENGINE_SCHEDULER_COLLECT_SINK_H_

#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "engine/engine.h"

namespace dllm::testing {

class CollectSink final : public EventSink {
 public:
  void OnCommit(const CommitEvent& event) override {
    {
      absl::MutexLock lock(&mu_);
      commits_.push_back(event);
    }
    if (on_commit) on_commit(event);
  }
  void OnSnapshot(const SnapshotEvent& event) override {
    absl::MutexLock lock(&mu_);
    snapshots_.push_back(event);
  }
  void OnStep(const StepEvent& event) override {
    absl::MutexLock lock(&mu_);
    steps_.push_back(event);
  }
  void OnFinal(const FinalEvent& event) override {
    {
      absl::MutexLock lock(&mu_);
      ++finals_;
      final_ = event;
    }
    if (!done_.HasBeenNotified()) done_.Notify();
  }
  FinalEvent Wait() {
    done_.WaitForNotification();
    absl::MutexLock lock(&mu_);
    return *final_;
  }
  std::vector<CommitEvent> commits() {
    absl::MutexLock lock(&mu_);
    return commits_;
  }
  std::vector<SnapshotEvent> snapshots() {
    absl::MutexLock lock(&mu_);
    return snapshots_;
  }
  std::vector<StepEvent> steps() {
    absl::MutexLock lock(&mu_);
    return steps_;
  }
  int finals() {
    absl::MutexLock lock(&mu_);
    return finals_;
  }

  std::function<void(const CommitEvent&)> on_commit;  // set before submitting

 private:
  absl::Mutex mu_;
  std::vector<CommitEvent> commits_;
  std::vector<SnapshotEvent> snapshots_;
  std::vector<StepEvent> steps_;
  std::optional<FinalEvent> final_;
  int finals_ = 0;
  absl::Notification done_;
};

// A sink whose first commit (step 0) parks the worker thread: it signals `entered`, then
// waits for `release`. While parked, the queue can be filled or cancelled deterministically.
inline std::shared_ptr<CollectSink> BlockingSink(absl::Notification* entered,
                                                 absl::Notification* release) {
  auto sink = std::make_shared<CollectSink>();
  sink->on_commit = [entered, release](const CommitEvent& e) {
    if (e.step == 0) {
      entered->Notify();
      release->WaitForNotification();
    }
  };
  return sink;
}

}  // namespace dllm::testing

#endif  // DLLM_TESTS_ENGINE_SCHEDULER_COLLECT_SINK_H_
