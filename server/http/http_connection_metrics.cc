#include "server/http/http_connection_metrics.h"

#include <prometheus/client_metric.h>
#include <prometheus/metric_type.h>

#include <initializer_list>
#include <string>
#include <utility>

#include "server/http/http_listener.h"

namespace dllm {
namespace {

// One family; `values` are (label value, value) pairs, the label named `label` (none when
// `label` is empty: then `values` holds one pair).
prometheus::MetricFamily Family(std::string name, std::string help, prometheus::MetricType type,
                                const std::string& label,
                                std::initializer_list<std::pair<const char*, double>> values) {
  prometheus::MetricFamily family;
  family.name = std::move(name);
  family.help = std::move(help);
  family.type = type;
  for (const auto& [label_value, value] : values) {
    prometheus::ClientMetric metric;
    if (!label.empty()) metric.label.push_back({label, label_value});
    if (type == prometheus::MetricType::Counter) {
      metric.counter.value = value;
    } else {
      metric.gauge.value = value;
    }
    family.metric.push_back(std::move(metric));
  }
  return family;
}

}  // namespace

void HttpConnectionMetrics::Detach() {
  absl::MutexLock lock(&mu_);
  listener_ = nullptr;
}

std::vector<prometheus::MetricFamily> HttpConnectionMetrics::Collect() const {
  HttpListenerCounters c;
  {
    absl::MutexLock lock(&mu_);
    if (listener_ == nullptr) return {};
    c = listener_->counters();
  }
  using prometheus::MetricType;
  auto d = [](auto v) { return static_cast<double>(v); };
  return {
      Family("dllm_http_connections_open", "Open HTTP API connections.", MetricType::Gauge, "",
             {{"", d(c.open_connections)}}),
      Family("dllm_http_connections_accepted_total", "HTTP API connections accepted.",
             MetricType::Counter, "", {{"", d(c.accepted)}}),
      Family("dllm_http_connections_refused_total",
             "HTTP API connections closed on accept: full (every open connection had sent a "
             "request) or the peer's cap.",
             MetricType::Counter, "reason",
             {{"full", d(c.refused_full)}, {"per_peer", d(c.refused_per_peer)}}),
      Family("dllm_http_connections_evicted_total",
             "HTTP API connections closed to make room: the oldest that never sent a request.",
             MetricType::Counter, "", {{"", d(c.evicted)}}),
      Family("dllm_http_connection_timeouts_total",
             "HTTP API connections closed at a deadline: idle (no request), reading (a request's "
             "head or body late), writing (a reply write late).",
             MetricType::Counter, "phase",
             {{"idle", d(c.timed_out_idle)},
              {"reading", d(c.timed_out_reading)},
              {"writing", d(c.timed_out_writing)}}),
      Family("dllm_http_buffered_body_bytes",
             "Bytes reserved by HTTP request bodies being received (http.max_buffered_body_bytes "
             "bounds it).",
             MetricType::Gauge, "", {{"", d(c.buffered_body_bytes)}}),
      Family("dllm_http_body_budget_refusals_total",
             "HTTP requests answered 503 because http.max_buffered_body_bytes was full.",
             MetricType::Counter, "", {{"", d(c.refused_body_budget)}}),
  };
}

}  // namespace dllm
