// ProcessMetrics against independent readings of the same process (the hostile probe: process
// metrics for soak/RSS-drift checks).
#include "server/process_metrics.h"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <map>
#include <vector>

namespace dllm {
namespace {

std::map<std::string, double> Values() {
  std::map<std::string, double> out;
  for (const auto& family : ProcessMetrics().Collect()) {
    REQUIRE(family.metric.size() == 1);
    out[family.name] = family.type == prometheus::MetricType::Counter
                           ? family.metric[0].counter.value
                           : family.metric[0].gauge.value;
  }
  return out;
}

TEST_CASE("ProcessMetrics follows /proc", "[reliability][metrics]") {
  // Touch 64 MiB so that RSS moves by a known amount.
  std::map<std::string, double> before = Values();
  for (const char* name :
       {"process_cpu_seconds_total", "process_resident_memory_bytes", "process_open_fds",
        "process_start_time_seconds", "process_virtual_memory_bytes", "process_threads"}) {
    INFO(name);
    CHECK(before.count(name) == 1);
  }
  std::vector<char> block(64 << 20, 1);
  for (size_t i = 0; i < block.size(); i += 4096) block[i] = static_cast<char>(i);
  const std::map<std::string, double> after = Values();
  CHECK(after.at("process_resident_memory_bytes") - before.at("process_resident_memory_bytes") >=
        60.0 * (1 << 20));
  // statm's resident pages, read independently.
  std::ifstream statm("/proc/self/statm");
  double size_pages = 0, resident_pages = 0;
  statm >> size_pages >> resident_pages;
  const double rss = resident_pages * static_cast<double>(sysconf(_SC_PAGESIZE));
  CHECK(after.at("process_resident_memory_bytes") == Approx(rss).epsilon(0.05));
  CHECK(after.at("process_cpu_seconds_total") >= before.at("process_cpu_seconds_total"));
  CHECK(after.at("process_open_fds") >= 3);
  CHECK(after.at("process_threads") >= 1);
  CHECK(after.at("process_start_time_seconds") > 1.5e9);
  CHECK(block[4096] == static_cast<char>(4096));
}

}  // namespace
}  // namespace dllm
