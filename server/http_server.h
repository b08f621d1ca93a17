// HttpServer: the OpenAI-compatible HTTP API of dllm-server (config `http:`), beside gRPC.
//
//   POST /v1/chat/completions, POST /v1/completions   unary JSON, or SSE with "stream": true
//   GET  /v1/models, GET /v1/models/{id}
//   GET  /health                                      200 while serving, else 503 (no auth)
//
// It is a second transport over the same DiffusionService: the same bearer tokens, the same
// request mapping and limits (JSON -> v1::GenerateRequest -> GenerationRequest), the same
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
// A client that disconnects cancels its engine request: the handler thread waits on both
// the request's events and the connection's socket (POLLRDHUP), so the cancel reaches the
// engine before its next step.
//
// TLS: when the config's tls: section is set, the listener speaks HTTPS with the same
// certificate, key and (for mTLS) client CA as gRPC; never plaintext.
//
// Threading: cpp-httplib runs each connection on one of http.threads pool threads; a
// generation call holds its thread until it ends. Start/Stop are called from main only.
#ifndef DLLM_SERVER_HTTP_SERVER_H_
#define DLLM_SERVER_HTTP_SERVER_H_

#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "server/config.h"
#include "server/diffusion_service.h"
#include "server/logger.h"

namespace httplib {
class Server;
}

namespace dllm {

class HttpServer {
 public:
  // Binds http.address:http.port and starts serving on a background thread. `service` and
  // `logger` must outlive the server. UNAVAILABLE when the port cannot be bound,
  // INVALID_ARGUMENT/NOT_FOUND for unusable TLS files.
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(const ServerConfig& config,
                                                           DiffusionService* service,
                                                           Logger* logger);
  ~HttpServer();

  int port() const { return port_; }
  // Closes the listener and waits for every connection thread to finish. Call after the
  // engine drained (every accepted request then has its final event, so handlers end).
  void Stop();
  // The same, waiting at most `timeout`: a client that trickles a request's bytes keeps its
  // connection thread reading for as long as it likes, and shutdown must not wait for it.
  // False on timeout; the server's threads are then left running (and its memory
  // deliberately leaked), so the caller must exit the process soon.
  bool Stop(absl::Duration timeout);

 private:
  HttpServer() = default;

  std::shared_ptr<void> handlers_;  // the routes' state; destroyed after server_
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  absl::Notification listen_returned_;
  int port_ = 0;
};

}  // namespace dllm

#endif  // DLLM_SERVER_HTTP_SERVER_H_
