// Wall and process-CPU clocks shared by the benchmarks. On a shared machine the CPU seconds of
// all threads are the figure to compare; wall >> cpu / threads means contention.
#ifndef DLLM_BENCH_BENCH_CLOCK_H_
#define DLLM_BENCH_BENCH_CLOCK_H_

#include <time.h>

#include <chrono>

namespace dllm::bench {

using Clock = std::chrono::steady_clock;

// Wall seconds since `since`.
inline double Seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

// CPU seconds used by the whole process (all threads) so far.
inline double ProcessCpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

}  // namespace dllm::bench

#endif  // DLLM_BENCH_BENCH_CLOCK_H_
