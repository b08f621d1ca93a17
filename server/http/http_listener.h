// HttpListener: an event-driven HTTP/1.1 server (Boost.Beast's parser on asio), the transport
// under HttpServer's routes. It exists because a thread per connection (cpp-httplib) let 129
// clients trickling header bytes shut out every other HTTP user; here a connection costs a
// socket and a few KB, and only its own deadlines decide how long it may take.
//
// One connection's life:
//   idle      waiting for a request's first byte; closed after `idle_timeout`
//   reading   header, then body; the head must arrive within `head_timeout` of the request's
//             first byte, the whole request within `read_timeout` of it. After the header and
//             before any body byte, HttpRoutes::Precheck may refuse the request (the connection
//             then closes, its body unread).
//   answering HttpRoutes::Handle's reply is written; a reply produced over time (a generation)
//             is pulled from its HttpResponseSource whenever the source wakes the connection.
//             Each write must complete within `write_timeout`; waiting for the source has no
//             limit here (the engine's deadline bounds it).
// A client that resets its connection, or whose socket errors, abandons its reply (the source
// is told, and cancels the work). A client that half-closes after a complete request (legal,
// and curl and some proxies do it) still gets its reply: the listener sends it an interim
// `100 Continue` (which every HTTP/1.1 client must skip) so that a peer that has in fact
// closed both directions answers with a reset, which the listener then notices.
//
// Limits:
//   connections  at most `max_connections` open. When full, a new connection takes the place of
//                the oldest one that has not yet sent a whole request (a slow or idle client
//                that never asked for anything), which is closed; when every open connection
//                has sent one, the new connection is closed at once. At most
//                `max_connections_per_peer` from one client address (0: no such cap; behind a
//                proxy every client is the proxy).
//   head         at most `max_header_bytes`, within `head_timeout` of the request's first byte.
//   body         at most `max_body_bytes` (Content-Length or chunked: 413 before reading past
//                it). Bodies being received are held against one budget for all connections,
//                `max_buffered_body_bytes` (a Content-Length body reserves its length, a chunked
//                one `max_body_bytes`); a request that does not fit is answered 503 with
//                Retry-After before its body is read. (Whether freed bodies' memory goes back
//                to the system is the allocator's business: dllm-server's main sets it up.)
//   requests     at most `max_requests_per_connection` on one connection.
// Malformed requests (RFC 9112: a header line without a colon, a bare CR, conflicting
// Content-Length, ...) get a 400 that names the problem, and the connection closes.
//
// Threading: `threads` event-loop threads run every connection; one connection's work is
// serialized on its strand. HttpRoutes' methods run on those threads and must not block.
// Start/Stop are called from one thread.
#ifndef DLLM_SERVER_HTTP_HTTP_LISTENER_H_
#define DLLM_SERVER_HTTP_HTTP_LISTENER_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace dllm {

struct HttpRequestHead {
  std::string method;
  std::string target;  // as sent: path and query
  std::string path;    // target without its query
  int version = 11;    // 10 or 11 (HTTP/1.0, HTTP/1.1)
  // Header fields in arrival order, names as sent.
  std::vector<std::pair<std::string, std::string>> headers;

  // The first field named `name` (case-insensitive), if any.
  std::optional<std::string_view> Header(std::string_view name) const;
  size_t HeaderCount(std::string_view name) const;
};

struct HttpRequest {
  HttpRequestHead head;
  std::string body;
};

struct HttpResponse {
  int status = 200;
  std::string content_type;
  std::vector<std::pair<std::string, std::string>> headers;  // besides the framing ones
  std::string body;
  // The body follows as HttpOutput::data (chunked; `body` must be empty). Only from sources.
  bool streamed = false;
  bool close = false;  // close the connection after this response
};

// What a source has to send now. Empty (no head, no data, not end): nothing yet.
struct HttpOutput {
  // First, once: the response's head; for a response that is not streamed, the whole
  // response (`end` must then be true).
  std::optional<HttpResponse> head;
  std::string data;  // streamed body bytes
  bool end = false;  // nothing follows
};

// A reply produced after Handle returned. Called on the connection's strand only.
class HttpResponseSource {
 public:
  virtual ~HttpResponseSource() = default;
  // Called once, first. `wake` may be called from any thread at any time, any number of
  // times, whenever Poll may have something new; it never blocks. The source must drop it
  // (and never call it again) once Poll returned `end` or Abandon was called: it refers to
  // the listener's event loop, which may then be gone.
  virtual void Start(std::function<void()> wake) = 0;
  virtual HttpOutput Poll() = 0;
  // The client went away, or the listener stops: end the work. Poll is not called again.
  virtual void Abandon() = 0;
};

struct HttpReply {
  HttpResponse response;                       // when `source` is null
  std::shared_ptr<HttpResponseSource> source;  // a reply produced over time
};

// What the listener serves. Methods run on event-loop threads, concurrently for different
// connections, and must not block.
class HttpRoutes {
 public:
  virtual ~HttpRoutes() = default;
  // After the header, before any body byte is read. A response refuses the request: it is
  // sent and the connection closed.
  virtual std::optional<HttpResponse> Precheck(const HttpRequestHead& head) = 0;
  // Only for a request whose head Precheck accepted (so what Precheck checked, such as a
  // token, need not be checked again).
  virtual HttpReply Handle(HttpRequest request) = 0;
  // The listener's own refusals (400 malformed, 413 body too large, 431 header too large,
  // 500 when Handle threw) in the server's error shape. `head`: the request's method and
  // path when its request line could be read (its headers too when they could), else null.
  virtual HttpResponse Refusal(const HttpRequestHead* head, int status, std::string_view message,
                               std::string_view code) = 0;
};

struct HttpListenerOptions {
  std::string address = "0.0.0.0";
  int port = 0;  // 0: any free port (see HttpListener::port)
  int threads = 2;
  int max_connections = 4096;
  int max_connections_per_peer = 0;  // 0: no cap
  size_t max_header_bytes = size_t{16} << 10;
  size_t max_body_bytes = size_t{4} << 20;
  size_t max_buffered_body_bytes = size_t{256} << 20;  // must be >= max_body_bytes
  absl::Duration idle_timeout = absl::Seconds(5);
  absl::Duration head_timeout = absl::Seconds(10);  // capped at read_timeout
  absl::Duration read_timeout = absl::Seconds(30);
  absl::Duration write_timeout = absl::Seconds(30);
  int max_requests_per_connection = 1000;
  // TLS when `tls_cert` is set; `tls_client_ca` set: clients must present a certificate it
  // signed (mTLS).
  std::string tls_cert;
  std::string tls_key;
  std::string tls_client_ca;
  // Rare events worth a log line (accept failures, connections refused or closed at the
  // caps); may be null. Called on any thread, possibly often: the callee rate-limits.
  std::function<void(std::string_view event, std::string_view detail)> log;
};

// If the whole head in `raw` (bytes up to and including the blank line, or what arrived)
// breaks RFC 9112's framing rules, what is wrong, naming the header; else nullopt. Gives
// the parser's refusals a message a client can act on.
std::optional<std::string> DescribeMalformedHead(std::string_view raw);

// What a listener has done since it started: for metrics (HttpListener::counters).
struct HttpListenerCounters {
  size_t open_connections = 0;
  size_t buffered_body_bytes = 0;    // reserved by bodies being received now
  uint64_t accepted = 0;             // connections served (including those later evicted)
  uint64_t refused_full = 0;         // closed on accept: full, and none to evict
  uint64_t refused_per_peer = 0;     // closed on accept: the peer's cap
  uint64_t evicted = 0;              // closed to make room for a new one
  uint64_t timed_out_idle = 0;       // no request within idle_timeout
  uint64_t timed_out_reading = 0;    // a request's head or body not in time
  uint64_t timed_out_writing = 0;    // a reply write not in time
  uint64_t refused_body_budget = 0;  // requests answered 503 (max_buffered_body_bytes)
};

class HttpListener {
 public:
  // Binds and starts serving. `routes` must outlive the listener. UNAVAILABLE when the
  // address cannot be bound; INVALID_ARGUMENT when the TLS files are unusable.
  static absl::StatusOr<std::unique_ptr<HttpListener>> Start(HttpListenerOptions options,
                                                             HttpRoutes* routes);
  ~HttpListener();  // Stop(absl::ZeroDuration())
  HttpListener(const HttpListener&) = delete;
  HttpListener& operator=(const HttpListener&) = delete;

  int port() const;
  size_t open_connections() const;
  // Thread-safe; each field is read atomically (the set is not one snapshot).
  HttpListenerCounters counters() const;

  // From now on every reply carries Connection: close (a server about to drain: proxies that
  // keep connections give them up while every request is still served). Thread-safe.
  void CloseConnectionsAfterReplies();
  // Closes the listening socket (new connections are refused). Idle connections close after
  // a 200 ms grace (for a request already on its way); requests being read or answered are
  // finished with Connection: close. Does not wait.
  void StopAccepting();
  // StopAccepting, then waits up to `timeout` for the replies under way and cuts what
  // remains. True when nothing had to be cut. Returns with every event-loop thread joined.
  bool Stop(absl::Duration timeout);

  class Impl;

 private:
  explicit HttpListener(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace dllm

#endif  // DLLM_SERVER_HTTP_HTTP_LISTENER_H_
