// HttpConnectionMetrics: the HTTP listener's connection counters as Prometheus series,
// collected at scrape time (HttpListener::counters()).
//
//   dllm_http_connections_open                      gauge
//   dllm_http_connections_accepted_total            counter
//   dllm_http_connections_refused_total{reason}     counter: full (http.max_connections and
//                                                   every connection had sent a request) |
//                                                   per_peer (http.max_connections_per_peer)
//   dllm_http_connections_evicted_total             counter: closed to make room (the oldest
//                                                   that never sent a request)
//   dllm_http_connection_timeouts_total{phase}      counter: idle | reading | writing
//   dllm_http_buffered_body_bytes                   gauge: reserved by bodies being received
//   dllm_http_body_budget_refusals_total            counter: 503s at
//                                                   http.max_buffered_body_bytes
//
// Thread-safety: Collect and Detach may run concurrently on any threads.
#ifndef DLLM_SERVER_HTTP_HTTP_CONNECTION_METRICS_H_
#define DLLM_SERVER_HTTP_HTTP_CONNECTION_METRICS_H_

#include <prometheus/collectable.h>
#include <prometheus/metric_family.h>

#include <vector>

#include "absl/synchronization/mutex.h"

namespace dllm {

class HttpListener;

class HttpConnectionMetrics : public prometheus::Collectable {
 public:
  // `listener` must stay alive until Detach returns.
  explicit HttpConnectionMetrics(const HttpListener* listener) : listener_(listener) {}
  // After it, Collect reports nothing; call before the listener goes.
  void Detach();
  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  mutable absl::Mutex mu_;
  const HttpListener* listener_ ABSL_GUARDED_BY(mu_);
};

}  // namespace dllm

#endif  // DLLM_SERVER_HTTP_HTTP_CONNECTION_METRICS_H_
