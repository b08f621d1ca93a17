// ThreadPool: a fixed set of workers for data-parallel loops on the CPU backend.
//
// ParallelFor(n, fn) runs fn(i) once for every i in [0, n) and returns when all are done.
// Each index runs entirely on one thread, so a task that owns its outputs (one row, one
// head) computes the same bits whatever the thread count or the scheduling.
//
// Thread-safety: ParallelFor may be called by one thread at a time (the engine worker).
#ifndef DLLM_ENGINE_BACKEND_CPU_THREAD_POOL_H_
#define DLLM_ENGINE_BACKEND_CPU_THREAD_POOL_H_

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace dllm {

class ThreadPool {
 public:
  // threads >= 1 counts the calling thread: threads - 1 workers are started.
  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int threads() const { return static_cast<int>(workers_.size()) + 1; }

  void ParallelFor(int64_t n, const std::function<void(int64_t)>& fn);

 private:
  void WorkerLoop();
  // Claims and runs indices of the current job until none are left.
  void RunTasks();

  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable work_cv_;
  std::condition_variable done_cv_;
  bool stop_ = false;
  uint64_t generation_ = 0;  // bumped for every job
  const std::function<void(int64_t)>* fn_ = nullptr;
  int64_t n_ = 0;
  int64_t next_ = 0;     // next unclaimed index
  int64_t pending_ = 0;  // indices claimed or unclaimed but not finished
};

}  // namespace dllm

#endif  // DLLM_ENGINE_BACKEND_CPU_THREAD_POOL_H_
