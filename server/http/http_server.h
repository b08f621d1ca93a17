// HttpServer: the OpenAI-compatible HTTP API of dllm-server (config `http:`), beside gRPC.
//
//   POST /v1/chat/completions, POST /v1/completions   unary JSON, or SSE with "stream": true
//   GET  /v1/models, GET /v1/models/{id}
//   GET  /health                                      200 while serving, else 503 (no auth)
//
// It is a second transport over the same Gateway as gRPC (gateway.h): the same bearer tokens, the
// same request mapping and limits (JSON -> v1::GenerateRequest -> GenerationRequest), the same
// engine queue (a full queue is 429), the same drain (503 once SetDraining was called) and
// the same dllm_requests_total counter (protocol="http"). Request JSON mapping lives in
// http_openai_mapping.h, status mapping in http_status_mapping.h.
//
// Streaming: one SSE event per non-empty committed delta (the first event carries the
// assistant role), then a final chunk with finish_reason, usage, cache_stats and timings,
// then `data: [DONE]`. An error after the stream started is sent as one
// `data: {"error": ...}` event before [DONE].
//
// Stop strings (http_stop_sequences.h) cut the committed text before the first match and
// cancel the engine request at once; such a request ends OK with finish_reason "stop".
//
// A client that disconnects cancels its engine request (the listener notices a reset or a
// failed write at once); one that only half-closes after its request still gets the reply.
//
// TLS: when the config's tls: section is set, the listener speaks HTTPS with the same
// certificate, key and (for mTLS) client CA as gRPC; never plaintext.
//
// Transport: server/http/http_listener.h (event-driven; connections are not tied to threads). Its
// limits come from the config: http.threads event-loop threads, http.max_connections open
// connections (http.max_connections_per_peer from one address), http.head_timeout_seconds for
// a request's head and http.read_timeout_seconds for the whole request to arrive (and each
// reply write to progress), server.max_receive_message_bytes per body and
// http.max_buffered_body_bytes for all bodies being received, a 5 s keep-alive idle timeout.
// Start/Stop are called from main only.
#ifndef DLLM_SERVER_HTTP_HTTP_SERVER_H_
#define DLLM_SERVER_HTTP_HTTP_SERVER_H_

#include <memory>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/config.h"
#include "server/gateway.h"
#include "server/http/http_connection_metrics.h"
#include "server/http/http_listener.h"
#include "server/log_rate_limiter.h"
#include "server/logger.h"

namespace dllm {

class HttpServer {
 public:
  // Binds http.address:http.port and starts serving on background threads. `gateway` and
  // `logger` must outlive the server. UNAVAILABLE when the port cannot be bound,
  // INVALID_ARGUMENT/NOT_FOUND for unusable TLS files.
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(const ServerConfig& config,
                                                           Gateway* gateway, Logger* logger);
  ~HttpServer();

  int port() const;
  // The listener's connection counters as metrics (http_connection_metrics.h); register it
  // with the metrics endpoint. Reports nothing once the server is destroyed.
  std::shared_ptr<prometheus::Collectable> connection_metrics() const {
    return connection_metrics_;
  }
  // Every reply closes its connection from now on (the lame duck before a drain).
  void SetLameDuck() { listener_->CloseConnectionsAfterReplies(); }
  // New connections are refused from now on; idle ones close (HttpListener::StopAccepting).
  void StopAccepting();
  // Stops accepting, closes idle connections and those still sending a request, and waits
  // up to `timeout` for the replies under way (call after the engine drained: every accepted
  // request then has its final event). False when connections had to be cut at the timeout.
  bool Stop(absl::Duration timeout);

 private:
  HttpServer();

  std::unique_ptr<LogRateLimiter> accept_log_limiter_;
  std::unique_ptr<HttpRoutes> routes_;                         // outlives listener_
  std::unique_ptr<HttpListener> listener_;                     // stopped before routes_ goes
  std::shared_ptr<HttpConnectionMetrics> connection_metrics_;  // detached before listener_ goes
};

}  // namespace dllm

#endif  // DLLM_SERVER_HTTP_HTTP_SERVER_H_
