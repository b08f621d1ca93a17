// MetricsEndpoint: Prometheus's text format at GET /metrics, on a port of its own
// (metrics.address:metrics.port), served by the same event-driven HttpListener as the API.
//
// Why not prometheus-cpp's Exposer: its civetweb server gives each connection a worker thread
// until a request arrives, so a handful of idle TCP connections (a port scanner, a balancer's
// TCP probe, a stuck client) held off every scrape for seconds. Here an idle connection costs
// a socket and no thread; the listener's idle timeout closes it, and when the connection cap
// is reached, a scrape takes the place of the oldest connection that never sent a request.
//
//   GET /metrics   200, text/plain; version=0.0.4: every registered collectable's families
//   HEAD /metrics  the same head, no body
//   other paths    404; other methods 405 with Allow; request bodies are refused (413)
//
// Thread-safety: Register may be called from any thread at any time; collectables are
// collected on the listener's threads, concurrently with each other's scrapes.
#ifndef DLLM_SERVER_HTTP_METRICS_ENDPOINT_H_
#define DLLM_SERVER_HTTP_METRICS_ENDPOINT_H_

#include <prometheus/collectable.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace dllm {

class HttpListener;

class MetricsEndpoint {
 public:
  // Binds `address`:`port` (0: any free port). UNAVAILABLE when it cannot be bound.
  static absl::StatusOr<std::unique_ptr<MetricsEndpoint>> Start(const std::string& address,
                                                                int port);
  ~MetricsEndpoint();  // stops serving, cutting scrapes under way
  MetricsEndpoint(const MetricsEndpoint&) = delete;
  MetricsEndpoint& operator=(const MetricsEndpoint&) = delete;

  // Collected on every scrape while it lives; the endpoint does not keep it alive.
  void Register(std::weak_ptr<prometheus::Collectable> collectable);
  int port() const;

  class Routes;

 private:
  MetricsEndpoint();
  std::unique_ptr<Routes> routes_;          // outlives listener_
  std::unique_ptr<HttpListener> listener_;  // stopped before routes_ goes
};

}  // namespace dllm

#endif  // DLLM_SERVER_HTTP_METRICS_ENDPOINT_H_
