// ProcessMetrics: the standard Prometheus process_* series, read from /proc at scrape time.
//
//   process_cpu_seconds_total        counter: user + system CPU time
//   process_resident_memory_bytes    gauge: RSS
//   process_virtual_memory_bytes     gauge: VSZ
//   process_open_fds                 gauge: open file descriptors
//   process_start_time_seconds       gauge: start time, seconds since the Unix epoch
//   process_threads                  gauge: threads
//
// prometheus-cpp 1.x has no process collector, hence this one. Collect() never fails: a
// value that cannot be read is left out.
//
// Thread-safety: Collect may run on any thread (it only reads /proc).
#ifndef DLLM_SERVER_PROCESS_METRICS_H_
#define DLLM_SERVER_PROCESS_METRICS_H_

#include <prometheus/collectable.h>
#include <prometheus/metric_family.h>

#include <string>
#include <vector>

namespace dllm {

class ProcessMetrics : public prometheus::Collectable {
 public:
  // `proc_dir` is /proc/self except in tests.
  explicit ProcessMetrics(std::string proc_dir = "/proc/self");
  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  const std::string proc_dir_;
};

}  // namespace dllm

#endif  // DLLM_SERVER_PROCESS_METRICS_H_
