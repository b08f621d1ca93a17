#include "server/process_metrics.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace dllm {
namespace {

prometheus::MetricFamily Family(const std::string& name, const std::string& help,
                                prometheus::MetricType type, double value) {
  prometheus::MetricFamily family;
  family.name = name;
  family.help = help;
  family.type = type;
  prometheus::ClientMetric metric;
  if (type == prometheus::MetricType::Counter) {
    metric.counter.value = value;
  } else {
    metric.gauge.value = value;
  }
  family.metric.push_back(metric);
  return family;
}

// Seconds since the epoch at boot, from /proc/stat's btime (process start times count from
// boot in clock ticks).
double BootTimeSeconds() {
  std::ifstream in("/proc/stat");
  std::string key;
  double value = 0;
  while (in >> key) {
    if (key == "btime" && in >> value) return value;
    in.ignore(1 << 20, '\n');
  }
  return 0;
}

}  // namespace

ProcessMetrics::ProcessMetrics(std::string proc_dir) : proc_dir_(std::move(proc_dir)) {}

std::vector<prometheus::MetricFamily> ProcessMetrics::Collect() const {
  using prometheus::MetricType;
  std::vector<prometheus::MetricFamily> out;
  const double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
  const double page = static_cast<double>(sysconf(_SC_PAGESIZE));

  // /proc/<pid>/stat: fields after the parenthesised command name (which may hold spaces).
  std::ifstream stat_file(proc_dir_ + "/stat");
  std::string stat((std::istreambuf_iterator<char>(stat_file)), std::istreambuf_iterator<char>());
  const size_t close = stat.rfind(')');
  if (close != std::string::npos && ticks > 0) {
    std::istringstream fields(stat.substr(close + 2));
    std::vector<std::string> f;
    for (std::string s; fields >> s;) f.push_back(s);
    // f[0] is field 3 (state): utime = field 14, stime 15, num_threads 20, starttime 22,
    // vsize 23, rss 24 (pages).
    if (f.size() >= 22) {
      const double cpu = (std::stod(f[11]) + std::stod(f[12])) / ticks;
      out.push_back(Family("process_cpu_seconds_total", "User and system CPU time in seconds",
                           MetricType::Counter, cpu));
      out.push_back(
          Family("process_threads", "Threads of the process", MetricType::Gauge, std::stod(f[17])));
      out.push_back(Family("process_start_time_seconds",
                           "Start time of the process since the Unix epoch in seconds",
                           MetricType::Gauge, BootTimeSeconds() + std::stod(f[19]) / ticks));
      out.push_back(Family("process_virtual_memory_bytes", "Virtual memory size in bytes",
                           MetricType::Gauge, std::stod(f[20])));
      out.push_back(Family("process_resident_memory_bytes", "Resident memory size in bytes",
                           MetricType::Gauge, std::stod(f[21]) * page));
    }
  }
  std::error_code ec;
  double fds = 0;
  for (auto it = std::filesystem::directory_iterator(proc_dir_ + "/fd", ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    ++fds;
  }
  if (!ec) {
    out.push_back(Family("process_open_fds", "Open file descriptors", MetricType::Gauge, fds));
  }
  return out;
}

}  // namespace dllm
