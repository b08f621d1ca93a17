#include "client/load_test.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <nlohmann/json.hpp>
#include <thread>

#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "client/grpc_code_name.h"
#include "dllm/v1/dllm.grpc.pb.h"

namespace dllm::client {
double LoadReport::Percentile(double q) const {
  if (latencies_seconds.empty()) return 0;
  const size_t rank = static_cast<size_t>(std::ceil(q * latencies_seconds.size()));
  return latencies_seconds[std::clamp<size_t>(rank, 1, latencies_seconds.size()) - 1];
}

LoadReport RunLoad(const Connection& connection, const v1::GenerateRequest& request,
                   const ClientOptions& options) {
  auto stub = v1::DiffusionLM::NewStub(connection.channel());
  std::atomic<int> issued{0};
  const absl::Time start = absl::Now();
  const absl::Time stop = options.duration_seconds
                              ? start + absl::Seconds(*options.duration_seconds)
                              : absl::InfiniteFuture();
  absl::Mutex mu;
  LoadReport report;
  auto worker = [&]() {
    while (true) {
      if (options.requests && issued.fetch_add(1) >= *options.requests) return;
      if (absl::Now() >= stop) return;
      grpc::ClientContext context;
      connection.Prepare(&context);
      const absl::Time t0 = absl::Now();
      grpc::Status status;
      int64_t tokens = 0;
      if (options.stream) {
        auto reader = stub->GenerateStream(&context, request);
        v1::GenerateStreamResponse message;
        int committed = 0;
        while (reader->Read(&message)) {
          if (message.has_final()) tokens = message.final().usage().generated_tokens();
          // --cancel-after N: the client walks away after N committed deltas; the server
          // must still end the call once, as CANCELLED (the soak bench checks its count).
          if (message.has_committed() && options.cancel_after > 0 &&
              ++committed == options.cancel_after) {
            context.TryCancel();
          }
        }
        status = reader->Finish();
      } else {
        v1::GenerateResponse response;
        status = stub->Generate(&context, request, &response);
        tokens = response.usage().generated_tokens();
      }
      const double seconds = absl::ToDoubleSeconds(absl::Now() - t0);
      absl::MutexLock lock(&mu);
      ++report.requests;
      const std::string code = GrpcCodeName(status.error_code());
      ++report.by_status[code];
      if (!status.ok()) report.first_error_by_status.emplace(code, status.error_message());
      if (status.ok()) {
        ++report.ok;
        report.generated_tokens += tokens;
        report.latencies_seconds.push_back(seconds);
      }
    }
  };
  std::vector<std::thread> threads;
  threads.reserve(options.concurrency);
  for (int i = 0; i < options.concurrency; ++i) threads.emplace_back(worker);
  for (auto& t : threads) t.join();
  report.wall_seconds = absl::ToDoubleSeconds(absl::Now() - start);
  std::sort(report.latencies_seconds.begin(), report.latencies_seconds.end());
  return report;
}

std::string FormatLoadReport(const LoadReport& r, bool json) {
  const double wall = std::max(r.wall_seconds, 1e-9);
  if (json) {
    nlohmann::ordered_json j;
    j["requests"] = r.requests;
    j["ok"] = r.ok;
    j["by_status"] = r.by_status;
    j["first_error_by_status"] = r.first_error_by_status;
    j["wall_seconds"] = r.wall_seconds;
    j["requests_per_second"] = r.ok / wall;
    j["generated_tokens"] = r.generated_tokens;
    j["tokens_per_second"] = r.generated_tokens / wall;
    j["latency_seconds"] = {{"p50", r.Percentile(0.5)},
                            {"p90", r.Percentile(0.9)},
                            {"p99", r.Percentile(0.99)},
                            {"max", r.latencies_seconds.empty() ? 0 : r.latencies_seconds.back()}};
    return j.dump(2) + "\n";
  }
  std::string out = absl::StrFormat(
      "requests: %d (ok %d) in %.2f s\nthroughput: %.2f req/s, %.1f generated tokens/s\n",
      r.requests, r.ok, r.wall_seconds, r.ok / wall, r.generated_tokens / wall);
  absl::StrAppendFormat(&out, "latency (ok): p50 %.3f s  p90 %.3f s  p99 %.3f s  max %.3f s\n",
                        r.Percentile(0.5), r.Percentile(0.9), r.Percentile(0.99),
                        r.latencies_seconds.empty() ? 0.0 : r.latencies_seconds.back());
  out += "by status:";
  for (const auto& [code, n] : r.by_status) absl::StrAppendFormat(&out, " %s=%d", code, n);
  out += "\n";
  for (const auto& [code, message] : r.first_error_by_status) {
    absl::StrAppendFormat(&out, "first %s: %s\n", code, message);
  }
  return out;
}

}  // namespace dllm::client
