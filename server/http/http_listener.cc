#include "server/http/http_listener.h"

#include <poll.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/status.hpp>
#include <boost/beast/http/string_body.hpp>
#include <chrono>
#include <cstdint>
#include <exception>
#include <limits>
#include <map>
#include <thread>
#include <type_traits>
#include <unordered_map>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"

namespace dllm {

namespace asio = boost::asio;
namespace http = boost::beast::http;
using tcp = asio::ip::tcp;
using error_code = boost::system::error_code;

namespace {
// Debian's Abseil has its own string_view type.
absl::string_view Absl(std::string_view s) { return absl::string_view(s.data(), s.size()); }
}  // namespace

std::optional<std::string_view> HttpRequestHead::Header(std::string_view name) const {
  for (const auto& [key, value] : headers) {
    if (absl::EqualsIgnoreCase(key, Absl(name))) return std::string_view(value);
  }
  return std::nullopt;
}

size_t HttpRequestHead::HeaderCount(std::string_view name) const {
  size_t n = 0;
  for (const auto& header : headers) n += absl::EqualsIgnoreCase(header.first, Absl(name)) ? 1 : 0;
  return n;
}

namespace {

// A header line as a client can recognize it in an error message: control characters
// escaped, long lines cut.
std::string Quote(std::string_view line) {
  std::string out;
  for (const char c : line.substr(0, 60)) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      absl::StrAppend(&out, c == '\r' ? "\\r" : c == '\n' ? "\\n" : c == '\t' ? "\\t" : "\\x??");
    } else {
      out.push_back(c);
    }
  }
  if (line.size() > 60) out += "...";
  return out;
}

bool IsTokenChar(char c) {
  return absl::ascii_isalnum(static_cast<unsigned char>(c)) ||
         std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

}  // namespace

std::optional<std::string> DescribeMalformedHead(std::string_view raw) {
  const size_t end = raw.find("\r\n\r\n");
  if (end != std::string_view::npos) raw = raw.substr(0, end);
  std::vector<std::string_view> lines;
  for (const absl::string_view line : absl::StrSplit(Absl(raw), "\r\n")) {
    lines.emplace_back(line.data(), line.size());
  }
  if (lines.empty()) return std::nullopt;
  if (lines[0].find_first_of("\r\n") != std::string_view::npos) {
    return absl::StrCat("the request line ('", Quote(lines[0]), "') holds a bare CR or LF");
  }
  size_t content_lengths = 0;
  bool transfer_encoding = false;
  for (size_t i = 1; i < lines.size(); ++i) {
    const std::string_view line = lines[i];
    const size_t colon = line.find(':');
    const std::string_view name = line.substr(0, colon);
    if (!line.empty() && (line[0] == ' ' || line[0] == '\t')) {
      return absl::StrCat("header line ", i, " ('", Quote(line),
                          "') continues the previous one (obsolete line folding)");
    }
    if (colon == std::string_view::npos) {
      if (line.find_first_of("\r\n") != std::string_view::npos) {
        return absl::StrCat("header line ", i, " ('", Quote(line), "') holds a bare CR or LF");
      }
      return absl::StrCat("header line ", i, " ('", Quote(line), "') has no colon");
    }
    if (name.empty()) return absl::StrCat("header line ", i, " ('", Quote(line), "') has no name");
    for (const char c : name) {
      if (!IsTokenChar(c)) {
        return absl::StrCat("header ", Quote(name),
                            ": invalid character in its name (whitespace before the colon?)");
      }
    }
    if (line.substr(colon + 1).find_first_of(std::string_view("\r\n\0", 3)) !=
        std::string_view::npos) {
      return absl::StrCat("header ", Quote(name), ": control character in its value");
    }
    if (absl::EqualsIgnoreCase(Absl(name), "Content-Length")) ++content_lengths;
    if (absl::EqualsIgnoreCase(Absl(name), "Transfer-Encoding")) transfer_encoding = true;
  }
  if (content_lengths > 1) return std::string("more than one Content-Length header");
  if (content_lengths > 0 && transfer_encoding) {
    return std::string("both Content-Length and Transfer-Encoding");
  }
  return std::nullopt;
}

// ------------------------------------------------------------ connections

class ConnectionBase : public std::enable_shared_from_this<ConnectionBase> {
 public:
  virtual ~ConnectionBase() = default;
  // Each runs on the connection's strand (post them there).
  virtual void Run() = 0;
  virtual void StopServing() = 0;  // finish the reply under way, if any, then close
  virtual void Cut() = 0;          // close now
  virtual asio::any_io_executor executor() = 0;

  // Set once by the listener before the connection runs; read under the listener's mutex.
  uint64_t sequence = 0;  // accept order
  std::string peer;       // the client's address
  // Whether a whole request has arrived on it: such a connection is never evicted.
  std::atomic<bool> received_request{false};
  bool evicted = false;  // guarded by the listener's mutex
};

// Why a connection's deadline passed (HttpListenerCounters).
enum class TimeoutKind { kIdle, kReading, kWriting };

class HttpListener::Impl {
 public:
  Impl(HttpListenerOptions options, HttpRoutes* routes)
      : options_(std::move(options)),
        routes_(routes),
        ioc_(options_.threads),
        acceptor_(asio::make_strand(ioc_)),
        backoff_(acceptor_.get_executor()) {}

  absl::Status Open();
  void Launch();
  void StopAccepting();
  bool Stop(absl::Duration timeout);

  int port() const { return port_; }
  size_t open_connections() const {
    absl::MutexLock lock(&mu_);
    return connections_.size();
  }
  HttpListenerCounters counters() const;
  void CloseConnectionsAfterReplies() { replies_close_.store(true); }
  bool replies_close() const { return replies_close_.load(); }
  const HttpListenerOptions& options() const { return options_; }
  HttpRoutes* routes() const { return routes_; }
  void Unregister(const ConnectionBase* connection);
  void CountTimeout(TimeoutKind kind);
  // Reserves `bytes` of the body budget; false (and counted) when they do not fit.
  bool ReserveBody(size_t bytes);
  // Gives back a reservation once its body is no longer held.
  void ReleaseBody(size_t bytes);

 private:
  void Accept();
  void OnAccept(const error_code& ec, tcp::socket socket);
  void Adopt(tcp::socket socket);
  // Under mu_: the oldest connection that has not received a whole request and is not
  // already being evicted, or null. The caller must release the result after mu_.
  std::shared_ptr<ConnectionBase> EvictionCandidate() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::vector<std::shared_ptr<ConnectionBase>> Live() {
    std::vector<std::shared_ptr<ConnectionBase>> out;
    absl::MutexLock lock(&mu_);
    for (const auto& entry : connections_) {
      if (auto c = entry.second.owner.lock()) out.push_back(std::move(c));
    }
    return out;
  }
  bool AwaitNoConnections(absl::Duration timeout) {
    absl::MutexLock lock(&mu_);
    return mu_.AwaitWithTimeout(
        absl::Condition(
            +[](std::map<uint64_t, Registered>* c) { return c->empty(); }, &connections_),
        timeout);
  }
  void Log(std::string_view event, std::string_view detail) const {
    if (options_.log) options_.log(event, detail);
  }

  const HttpListenerOptions options_;
  HttpRoutes* const routes_;
  int port_ = 0;

  mutable absl::Mutex mu_;
  // A connection while it is open. `connection` stays valid while the entry exists: the
  // destructor erases it (Unregister, under mu_) before the object goes. Code under mu_
  // reads through `connection` and must not take a reference it could be the last to drop:
  // that drop would run the destructor, which takes mu_ again.
  struct Registered {
    ConnectionBase* connection;
    std::weak_ptr<ConnectionBase> owner;
  };
  // By accept order, so that the oldest is found first.
  std::map<uint64_t, Registered> connections_ ABSL_GUARDED_BY(mu_);
  std::unordered_map<std::string, int> connections_per_peer_ ABSL_GUARDED_BY(mu_);
  size_t evicting_ ABSL_GUARDED_BY(mu_) = 0;  // evicted, still open: not counted at the cap
  uint64_t next_sequence_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;

  struct Counts {
    std::atomic<uint64_t> accepted{0}, refused_full{0}, refused_per_peer{0}, evicted{0};
    std::atomic<uint64_t> timed_out_idle{0}, timed_out_reading{0}, timed_out_writing{0};
    std::atomic<uint64_t> refused_body_budget{0};
  } counts_;
  std::atomic<size_t> buffered_body_bytes_{0};
  std::atomic<bool> replies_close_{false};

  // Declared before the io_context: connections (destroyed with its pending handlers) use
  // the TLS context and unregister under mu_.
  std::optional<asio::ssl::context> tls_;
  asio::io_context ioc_;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work_;
  tcp::acceptor acceptor_;
  asio::steady_timer backoff_;  // after a failed accept (EMFILE): try again shortly
  std::vector<std::thread> threads_;
};

namespace {

constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
// Bytes one read ahead takes: a client's next request (keep-alive, pipelined) sent while its
// reply is under way is read no further than that until the reply is written.
constexpr size_t kMaxAheadBytes = 4096;
// How long an idle connection stays open once the listener stops (see StopServing).
constexpr absl::Duration kStopGrace = absl::Milliseconds(200);
// How often a connection whose client half-closed is checked for a reset.
constexpr auto kLivenessPeriod = std::chrono::milliseconds(100);

std::chrono::steady_clock::duration ToChrono(absl::Duration d) {
  return absl::ToChronoNanoseconds(d);
}

std::string Reason(int status) {
  const auto reason = http::obsolete_reason(http::int_to_status(status));
  return std::string(reason.data(), reason.size());
}

// What framing a response goes out with.
enum class Framing { kLength, kChunked, kUntilClose };

std::string SerializeHead(const HttpResponse& r, Framing framing, bool keep_alive,
                          absl::Duration idle_timeout) {
  std::string out = absl::StrCat("HTTP/1.1 ", r.status, " ", Reason(r.status), "\r\n");
  // nosniff on every typed response: a browser must not read JSON or SSE as another type.
  if (!r.content_type.empty()) {
    absl::StrAppend(&out, "Content-Type: ", r.content_type,
                    "\r\nX-Content-Type-Options: nosniff\r\n");
  }
  for (const auto& [name, value] : r.headers) absl::StrAppend(&out, name, ": ", value, "\r\n");
  switch (framing) {
    case Framing::kLength:
      absl::StrAppend(&out, "Content-Length: ", r.body.size(), "\r\n");
      break;
    case Framing::kChunked:
      out += "Transfer-Encoding: chunked\r\n";
      break;
    case Framing::kUntilClose:
      break;
  }
  if (keep_alive) {
    absl::StrAppend(&out, "Connection: keep-alive\r\nKeep-Alive: timeout=",
                    absl::ToInt64Seconds(idle_timeout), "\r\n");
  } else {
    out += "Connection: close\r\n";
  }
  out += "\r\n";
  return out;
}

template <class Stream>
class Connection final : public ConnectionBase {
 public:
  static constexpr bool kTls = !std::is_same_v<Stream, tcp::socket>;

  template <class... Args>
  Connection(HttpListener::Impl* listener, Args&&... args)
      : listener_(listener),
        options_(listener->options()),
        stream_(std::forward<Args>(args)...),
        buffer_(options_.max_header_bytes + kMaxAheadBytes + (size_t{16} << 10)),
        timer_(socket().get_executor()),
        liveness_(socket().get_executor()) {}

  ~Connection() override {
    if (source_ != nullptr && !source_done_) source_->Abandon();
    ReleaseBody();
    listener_->Unregister(this);
  }

  asio::any_io_executor executor() override { return socket().get_executor(); }

  void Run() override {
    if constexpr (kTls) {
      Arm(HeadTimeout(), TimeoutKind::kReading);
      stream_.async_handshake(asio::ssl::stream_base::server, [self = Self()](error_code ec) {
        if (self->closed_) return;
        if (ec) return self->Close();
        self->WaitForRequest();
      });
    } else {
      WaitForRequest();
    }
  }

  void StopServing() override {
    stopping_ = true;
    keep_alive_ = false;
    // An idle connection may carry a request already on its way (a balancer that connected
    // a moment ago): it gets a short grace, then closes. A request being read is still
    // served (with Connection: close), within its read deadline and Stop's timeout.
    if (phase_ == Phase::kIdle) Arm(kStopGrace);
  }

  void Cut() override { Close(); }

 private:
  enum class Phase { kIdle, kReading, kAnswering, kClosing };

  std::shared_ptr<Connection> Self() {
    return std::static_pointer_cast<Connection>(shared_from_this());
  }

  tcp::socket& socket() {
    if constexpr (kTls) {
      return stream_.next_layer();
    } else {
      return stream_;
    }
  }

  // One deadline at a time: the phase's (idle, reading, a write). On expiry the connection
  // closes, and a client's lateness (`kind`) is counted.
  void Arm(absl::Duration timeout, std::optional<TimeoutKind> kind = std::nullopt) {
    const uint64_t generation = ++timer_generation_;
    timer_.expires_after(ToChrono(timeout));
    timer_.async_wait([self = Self(), generation, kind](error_code ec) {
      if (ec || generation != self->timer_generation_ || self->closed_) return;
      if (kind) self->listener_->CountTimeout(*kind);
      self->Close();
    });
  }
  absl::Duration HeadTimeout() const {
    return std::min(options_.head_timeout, options_.read_timeout);
  }
  void ReleaseBody() {
    if (body_reserved_bytes_ == 0) return;
    listener_->ReleaseBody(body_reserved_bytes_);
    body_reserved_bytes_ = 0;
  }
  void Disarm() {
    ++timer_generation_;
    timer_.cancel();
  }

  void Close() {
    if (closed_) return;
    closed_ = true;
    Disarm();
    ReleaseBody();
    liveness_.cancel();
    if (source_ != nullptr && !source_done_) {
      source_done_ = true;
      source_->Abandon();
    }
    error_code ignored;
    socket().shutdown(tcp::socket::shutdown_both, ignored);
    socket().close(ignored);
  }

  // After a reply with Connection: close: send what is written, then read (and drop) until
  // the client closes, briefly, so that unread request bytes do not turn our close into a
  // reset that could destroy the reply before the client read it.
  void CloseAfterReply() {
    phase_ = Phase::kClosing;
    error_code ignored;
    socket().shutdown(tcp::socket::shutdown_send, ignored);
    Arm(absl::Seconds(2));
    if (!reading_) ReadAhead();
  }

  void WaitForRequest() {
    if (stopping_ || requests_ >= options_.max_requests_per_connection) return Close();
    phase_ = Phase::kIdle;
    if (buffer_.size() > 0) return ReadHeader();
    Arm(options_.idle_timeout, TimeoutKind::kIdle);
    ReadAhead();
  }

  // A read for whatever comes: the next request's first byte when idle; while answering,
  // bytes sent ahead, or the client's close (half or whole), or a reset.
  void ReadAhead() {
    reading_ = true;
    stream_.async_read_some(buffer_.prepare(kMaxAheadBytes),
                            [self = Self()](error_code ec, size_t n) { self->OnReadAhead(ec, n); });
  }

  void OnReadAhead(error_code ec, size_t n) {
    reading_ = false;
    if (closed_) return;
    buffer_.commit(n);
    if (phase_ == Phase::kClosing) {
      if (ec) return Close();
      buffer_.consume(buffer_.size());
      return ReadAhead();
    }
    if (phase_ != Phase::kAnswering) {
      if (ec) return Close();
      return ReadHeader();
    }
    if (!ec) {
      // The client sent its next request (keep-alive, pipelined) before this reply was
      // written. Read no further: Finish parses the buffered bytes, which it could not do
      // under an outstanding read (the request would wait for bytes that never come). Its
      // leaving now shows through the liveness probe and the reply's write.
      return WatchLiveness();
    }
    if (ec != asio::error::eof && ec != asio::ssl::error::stream_truncated) return Close();
    // The client half-closed: it may still read. Keep answering; prompt a reset from a
    // client that closed both ways, and watch for it.
    peer_closed_send_ = true;
    if (!head_sent_ && !writing_ && version_ >= 11) {
      Write(std::string(kContinue), [](Connection& self) { self.Pump(); });
    }
    WatchLiveness();
  }

  void WatchLiveness() {
    liveness_.expires_after(kLivenessPeriod);
    liveness_.async_wait([self = Self()](error_code ec) {
      if (ec || self->closed_ || self->phase_ != Phase::kAnswering) return;
      pollfd p = {self->socket().native_handle(), 0, 0};
      if (::poll(&p, 1, 0) == 1 && (p.revents & (POLLERR | POLLHUP))) return self->Close();
      self->WatchLiveness();
    });
  }

  void ReadHeader() {
    phase_ = Phase::kReading;
    request_deadline_ = absl::Now() + options_.read_timeout;
    Arm(HeadTimeout(), TimeoutKind::kReading);  // from the request's first byte
    parser_.emplace();
    parser_->header_limit(static_cast<uint32_t>(options_.max_header_bytes));
    // No body limit until Precheck had its say: an unauthenticated caller learns nothing of
    // the limits (OnHeader checks Content-Length, ReadBody sets it for chunked bodies).
    parser_->body_limit(std::numeric_limits<uint64_t>::max());
    ReadHeadBytes();
  }

  // Collects the whole head before parsing it, so that a refusal can quote the raw lines
  // (the parser consumes the lines it accepted).
  void ReadHeadBytes() {
    const auto data = buffer_.data();
    const std::string_view raw(static_cast<const char*>(data.data()), data.size());
    if (raw.find("\r\n\r\n") != std::string_view::npos) return ParseHead(raw);
    // A head whose lines end in a bare LF never holds CRLF CRLF: refuse it now rather than
    // wait for the read timeout.
    if (raw.find("\n\n") != std::string_view::npos) {
      return RefuseMalformed(http::error::bad_line_ending,
                             "the head's lines end in a bare LF (HTTP/1.1 needs CRLF)");
    }
    if (raw.size() >= options_.max_header_bytes) {
      return RefuseMalformed(http::error::header_limit);
    }
    reading_ = true;
    stream_.async_read_some(
        buffer_.prepare(std::min<size_t>(4096, options_.max_header_bytes - raw.size() + 4)),
        [self = Self()](error_code ec, size_t n) {
          self->reading_ = false;
          if (self->closed_) return;
          self->buffer_.commit(n);
          if (ec) return self->Close();  // the client left, or its time ran out
          self->ReadHeadBytes();
        });
  }

  void ParseHead(std::string_view raw) {
    error_code ec;
    const size_t used = parser_->put(buffer_.data(), ec);
    if (!ec && !parser_->is_header_done()) ec = http::error::need_more;
    if (ec) {
      std::optional<std::string> why;
      if (ec != http::error::header_limit) why = DescribeMalformedHead(raw);
      return RefuseMalformed(ec, why);
    }
    // Framing the parser accepts but a proxy may read otherwise (two equal Content-Lengths,
    // obs-fold) is refused as the parser's own errors are.
    if (std::optional<std::string> why = DescribeMalformedHead(raw)) {
      return RefuseMalformed(http::error::bad_field, std::move(why));
    }
    buffer_.consume(used);
    OnHeader();
  }

  HttpRequestHead MakeHead() const {
    const auto& message = parser_->get();
    HttpRequestHead head;
    head.method = std::string(message.method_string());
    head.target = std::string(message.target());
    // The absolute form (RFC 9112 §3.2.2: "http://host/path?q", which a server must accept)
    // names the same path as the origin form.
    std::string_view origin = head.target;
    if (const size_t scheme = origin.find("://");
        scheme != std::string_view::npos && origin.find('/') > scheme) {
      const size_t slash = origin.find('/', scheme + 3);
      origin = slash == std::string_view::npos ? "/" : origin.substr(slash);
    }
    head.path = std::string(origin.substr(0, origin.find('?')));
    head.version = static_cast<int>(message.version());
    for (const auto& field : message) {
      head.headers.emplace_back(std::string(field.name_string()), std::string(field.value()));
    }
    return head;
  }

  // The parser refused the request: answer why, then close.
  void RefuseMalformed(error_code ec, std::optional<std::string> why = std::nullopt) {
    std::optional<HttpRequestHead> head;
    if (parser_ && !parser_->get().target().empty()) head = MakeHead();
    if (ec == http::error::header_limit) {
      return RespondAndClose(listener_->routes()->Refusal(
          head ? &*head : nullptr, 431,
          absl::StrCat("request header larger than ", options_.max_header_bytes, " bytes"),
          "header_too_large"));
    }
    if (ec == http::error::body_limit) {
      return RespondAndClose(listener_->routes()->Refusal(
          head ? &*head : nullptr, 413,
          absl::StrCat("request body larger than ", options_.max_body_bytes, " bytes"),
          "payload_too_large"));
    }
    RespondAndClose(listener_->routes()->Refusal(
        head ? &*head : nullptr, 400,
        why ? *why : absl::StrCat("malformed request: ", ec.message()), "bad_request"));
  }

  static bool IsParseError(error_code ec) {
    return ec.category() == http::make_error_code(http::error::bad_field).category() &&
           ec != http::error::end_of_stream && ec != http::error::partial_message &&
           ec != http::error::need_more;
  }

  void OnHeader() {
    HttpRequestHead head = MakeHead();
    version_ = head.version;
    head_only_ = head.method == "HEAD";
    if (std::optional<HttpResponse> refusal = listener_->routes()->Precheck(head)) {
      return RespondAndClose(*std::move(refusal));
    }
    // A Content-Length beyond the limit is refused before reading; a chunked body when it
    // grows past it.
    if (parser_->content_length() && *parser_->content_length() > options_.max_body_bytes) {
      return RefuseMalformed(http::error::body_limit);
    }
    // The body's memory, before any of it is read: what it may grow to.
    const size_t body_bytes =
        parser_->content_length()
            ? static_cast<size_t>(*parser_->content_length())
            : (parser_->chunked() && !parser_->is_done() ? options_.max_body_bytes : 0);
    if (body_bytes > 0) {
      if (!listener_->ReserveBody(body_bytes)) {
        HttpResponse busy = listener_->routes()->Refusal(
            &head, 503,
            absl::StrCat("the server is receiving too many request bodies at once (",
                         options_.max_buffered_body_bytes,
                         " bytes, http.max_buffered_body_bytes); retry shortly"),
            "body_budget_exhausted");
        busy.headers.emplace_back("Retry-After", "1");
        return RespondAndClose(std::move(busy));
      }
      body_reserved_bytes_ = body_bytes;
    }
    if (!parser_->is_done() && parser_->get()[http::field::expect] == "100-continue" &&
        version_ >= 11) {
      return Write(std::string(kContinue), [](Connection& self) { self.ReadBody(true); });
    }
    ReadBody(false);
  }

  // `after_continue`: the client was told to send its body just now (it may have waited for
  // that), so the body gets a whole read_timeout; otherwise ReadHeader's deadline stands,
  // read_timeout from the request's first byte.
  void ReadBody(bool after_continue) {
    if (parser_->is_done()) return OnBody({});
    parser_->body_limit(options_.max_body_bytes);
    Arm(after_continue ? options_.read_timeout : request_deadline_ - absl::Now(),
        TimeoutKind::kReading);
    reading_ = true;
    http::async_read(stream_, buffer_, *parser_,
                     [self = Self()](error_code ec, size_t) { self->OnBody(ec); });
  }

  void OnBody(error_code ec) {
    reading_ = false;
    if (closed_) return;
    if (ec) {
      ReleaseBody();
      if (IsParseError(ec)) return RefuseMalformed(ec);
      return Close();
    }
    Disarm();
    received_request.store(true);
    ++requests_;
    keep_alive_ =
        parser_->keep_alive() && !stopping_ && requests_ < options_.max_requests_per_connection;
    HttpRequest request{MakeHead(), std::move(parser_->get().body())};
    parser_.reset();
    HttpReply reply;
    try {
      reply = listener_->routes()->Handle(std::move(request));
    } catch (const std::exception& e) {
      reply = HttpReply{listener_->routes()->Refusal(nullptr, 500, e.what(), ""), nullptr};
    }
    ReleaseBody();  // Handle took the body and is done with it
    phase_ = Phase::kAnswering;
    head_sent_ = false;
    peer_closed_send_ = false;
    if (reply.source == nullptr) {
      source_done_ = true;
      return SendComplete(reply.response);
    }
    source_ = std::move(reply.source);
    source_done_ = false;
    // Notice a client that leaves while its reply is produced: by a read when nothing is
    // buffered, else (a pipelined request waits) by the liveness probe (see OnReadAhead).
    if (buffer_.size() > 0) {
      WatchLiveness();
    } else {
      ReadAhead();
    }
    std::weak_ptr<ConnectionBase> weak = shared_from_this();
    source_->Start([weak, executor = executor()] {
      asio::post(executor, [weak] {
        if (auto self = weak.lock()) static_cast<Connection*>(self.get())->OnWake();
      });
    });
    Pump();
  }

  void OnWake() {
    if (closed_ || phase_ != Phase::kAnswering || source_ == nullptr) return;
    Pump();
  }

  // Sends what the source has now; called again after each write and on each wake.
  void Pump() {
    if (closed_ || writing_ || source_ == nullptr || source_done_) return;
    HttpOutput out = source_->Poll();
    std::string bytes;
    if (out.head) {
      head_sent_ = true;
      if (out.head->close) keep_alive_ = false;
      if (!out.head->streamed) {
        source_done_ = true;
        return SendComplete(*out.head);
      }
      framing_ = version_ >= 11 ? Framing::kChunked : Framing::kUntilClose;
      if (framing_ == Framing::kUntilClose || listener_->replies_close()) keep_alive_ = false;
      bytes = SerializeHead(*out.head, framing_, keep_alive_, options_.idle_timeout);
    }
    if (!out.data.empty()) {
      if (framing_ == Framing::kChunked) {
        absl::StrAppend(&bytes, absl::Hex(out.data.size()), "\r\n", out.data, "\r\n");
      } else {
        bytes += out.data;
      }
    }
    if (out.end) {
      source_done_ = true;
      if (framing_ == Framing::kChunked) bytes += "0\r\n\r\n";
    }
    if (bytes.empty()) {
      if (source_done_) Finish();
      return;  // nothing yet: a wake calls again
    }
    Write(std::move(bytes), [](Connection& self) {
      if (self.source_done_) return self.Finish();
      self.Pump();
    });
  }

  void SendComplete(const HttpResponse& response) {
    head_sent_ = true;
    if (response.close || listener_->replies_close()) keep_alive_ = false;
    std::string bytes =
        SerializeHead(response, Framing::kLength, keep_alive_, options_.idle_timeout);
    if (!head_only_) bytes += response.body;
    Write(std::move(bytes), [](Connection& self) { self.Finish(); });
  }

  void RespondAndClose(HttpResponse response) {
    phase_ = Phase::kAnswering;
    keep_alive_ = false;
    source_done_ = true;
    SendComplete(response);
  }

  // The reply is written.
  void Finish() {
    source_.reset();
    framing_ = Framing::kLength;
    liveness_.cancel();
    if (!keep_alive_ || peer_closed_send_ || stopping_) return CloseAfterReply();
    if (reading_) {  // the read ahead is still out: it delivers the next request
      phase_ = Phase::kIdle;
      Arm(options_.idle_timeout, TimeoutKind::kIdle);
      return;
    }
    WaitForRequest();
  }

  // One write at a time; `then` runs on success. A failed or timed-out write closes.
  void Write(std::string bytes, void (*then)(Connection&)) {
    writing_ = true;
    out_ = std::move(bytes);
    Arm(options_.write_timeout, TimeoutKind::kWriting);
    asio::async_write(stream_, asio::buffer(out_), [self = Self(), then](error_code ec, size_t) {
      self->writing_ = false;
      if (self->closed_) return;
      self->Disarm();
      if (ec) return self->Close();
      then(*self);
    });
  }

  HttpListener::Impl* const listener_;
  const HttpListenerOptions& options_;
  Stream stream_;
  boost::beast::flat_buffer buffer_;
  asio::steady_timer timer_;
  asio::steady_timer liveness_;
  uint64_t timer_generation_ = 0;
  std::optional<http::request_parser<http::string_body>> parser_;
  std::shared_ptr<HttpResponseSource> source_;
  std::string out_;

  Phase phase_ = Phase::kIdle;
  size_t body_reserved_bytes_ = 0;  // of the listener's body budget, for the current request
  absl::Time request_deadline_;     // read_timeout after the current request's first byte
  Framing framing_ = Framing::kLength;
  int version_ = 11;
  int requests_ = 0;
  bool closed_ = false;
  bool stopping_ = false;
  bool reading_ = false;
  bool writing_ = false;
  bool keep_alive_ = true;
  bool head_only_ = false;
  bool head_sent_ = false;
  bool source_done_ = true;
  bool peer_closed_send_ = false;
};

}  // namespace

// ------------------------------------------------------------ the listener

absl::Status HttpListener::Impl::Open() {
  if (!options_.tls_cert.empty()) {
    try {
      tls_.emplace(asio::ssl::context::tls_server);
      tls_->set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 |
                        asio::ssl::context::no_sslv3 | asio::ssl::context::no_tlsv1 |
                        asio::ssl::context::no_tlsv1_1);
      tls_->use_certificate_chain_file(options_.tls_cert);
      tls_->use_private_key_file(options_.tls_key, asio::ssl::context::pem);
      if (!options_.tls_client_ca.empty()) {
        tls_->load_verify_file(options_.tls_client_ca);
        tls_->set_verify_mode(asio::ssl::verify_peer | asio::ssl::verify_fail_if_no_peer_cert);
      }
    } catch (const boost::system::system_error& e) {
      return absl::InvalidArgumentError(
          absl::StrCat("tls: the HTTP listener cannot use tls.cert/tls.key/tls.client_ca: ",
                       e.code().message()));
    }
  }
  error_code ec;
  tcp::resolver resolver(ioc_);
  const auto endpoints =
      resolver.resolve(options_.address, std::to_string(options_.port),
                       tcp::resolver::passive | tcp::resolver::numeric_service, ec);
  if (ec || endpoints.empty()) {
    return absl::UnavailableError(absl::StrCat("cannot listen for HTTP on ", options_.address, ":",
                                               options_.port, ": ", ec.message()));
  }
  const tcp::endpoint endpoint = endpoints.begin()->endpoint();
  acceptor_.open(endpoint.protocol(), ec);
  if (!ec) acceptor_.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) acceptor_.bind(endpoint, ec);
  if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    return absl::UnavailableError(absl::StrCat("cannot listen for HTTP on ", options_.address, ":",
                                               options_.port, ": ", ec.message()));
  }
  port_ = acceptor_.local_endpoint().port();
  return absl::OkStatus();
}

void HttpListener::Impl::Launch() {
  work_.emplace(ioc_.get_executor());
  asio::post(acceptor_.get_executor(), [this] { Accept(); });
  for (int i = 0; i < options_.threads; ++i) threads_.emplace_back([this] { ioc_.run(); });
}

void HttpListener::Impl::Accept() {
  acceptor_.async_accept(asio::make_strand(ioc_), [this](error_code ec, tcp::socket socket) {
    OnAccept(ec, std::move(socket));
  });
}

void HttpListener::Impl::OnAccept(const error_code& ec, tcp::socket socket) {
  if (!ec) Adopt(std::move(socket));  // also when the acceptor closed meanwhile
  if (!acceptor_.is_open()) return;
  if (ec) {
    // Out of descriptors, most likely: a busy loop would not help. Try again shortly.
    if (options_.log) options_.log("http_accept_failed", ec.message());
    backoff_.expires_after(std::chrono::milliseconds(50));
    backoff_.async_wait([this](error_code wait_ec) {
      if (!wait_ec && acceptor_.is_open()) Accept();
    });
    return;
  }
  Accept();
}

void HttpListener::Impl::Adopt(tcp::socket socket) {
  error_code peer_ec;
  const tcp::endpoint remote = socket.remote_endpoint(peer_ec);
  std::string peer = peer_ec ? std::string() : remote.address().to_string();
  std::shared_ptr<ConnectionBase> connection;
  std::shared_ptr<ConnectionBase> evict;
  bool stopping = false;
  bool peer_full = false;
  {
    absl::MutexLock lock(&mu_);
    stopping = stopping_;
    const auto of_peer = connections_per_peer_.find(peer);
    peer_full = options_.max_connections_per_peer > 0 && of_peer != connections_per_peer_.end() &&
                of_peer->second >= options_.max_connections_per_peer;
    const bool full =
        connections_.size() - evicting_ >= static_cast<size_t>(options_.max_connections);
    if (!peer_full && full) {
      // Make room: the oldest connection that never sent a whole request is the likeliest
      // to be a slow or idle client holding a slot; one with a request is never cut.
      evict = EvictionCandidate();
      if (evict != nullptr) {
        evict->evicted = true;
        ++evicting_;
      }
    }
    if (!peer_full && (!full || evict != nullptr)) {
      error_code ignored;
      socket.set_option(tcp::no_delay(true), ignored);  // SSE events go out as written
      if (tls_) {
        connection = std::make_shared<Connection<asio::ssl::stream<tcp::socket>>>(
            this, std::move(socket), *tls_);
      } else {
        connection = std::make_shared<Connection<tcp::socket>>(this, std::move(socket));
      }
      connection->sequence = next_sequence_++;
      connection->peer = peer;
      connections_.emplace(connection->sequence, Registered{connection.get(), connection});
      ++connections_per_peer_[peer];
    }
  }
  if (evict != nullptr) {
    counts_.evicted.fetch_add(1);
    Log("http_connection_evicted",
        absl::StrCat("http.max_connections (", options_.max_connections,
                     ") reached: closed the oldest connection without a request, from ",
                     evict->peer));
    asio::post(evict->executor(), [evict] { evict->Cut(); });
  }
  if (connection == nullptr) {
    // `socket` closes as it goes out of scope.
    if (peer_full) {
      counts_.refused_per_peer.fetch_add(1);
      Log("http_connection_refused",
          absl::StrCat("http.max_connections_per_peer (", options_.max_connections_per_peer,
                       ") reached by ", peer));
    } else {
      counts_.refused_full.fetch_add(1);
      Log("http_connection_refused",
          absl::StrCat("http.max_connections (", options_.max_connections,
                       ") reached and every open connection has sent a request"));
    }
    return;
  }
  counts_.accepted.fetch_add(1);
  asio::post(connection->executor(), [connection, stopping] {
    connection->Run();
    if (stopping) connection->StopServing();
  });
}

std::shared_ptr<ConnectionBase> HttpListener::Impl::EvictionCandidate() {
  for (const auto& entry : connections_) {
    const ConnectionBase& c = *entry.second.connection;
    if (c.evicted || c.received_request.load()) continue;
    // Null when its last owner is already gone (its destructor waits for mu_): skip it.
    if (std::shared_ptr<ConnectionBase> owner = entry.second.owner.lock()) return owner;
  }
  return nullptr;
}

void HttpListener::Impl::Unregister(const ConnectionBase* connection) {
  absl::MutexLock lock(&mu_);
  connections_.erase(connection->sequence);
  if (connection->evicted) --evicting_;
  const auto of_peer = connections_per_peer_.find(connection->peer);
  if (of_peer != connections_per_peer_.end() && --of_peer->second <= 0) {
    connections_per_peer_.erase(of_peer);
  }
}

void HttpListener::Impl::CountTimeout(TimeoutKind kind) {
  switch (kind) {
    case TimeoutKind::kIdle:
      counts_.timed_out_idle.fetch_add(1);
      return;
    case TimeoutKind::kReading:
      counts_.timed_out_reading.fetch_add(1);
      return;
    case TimeoutKind::kWriting:
      counts_.timed_out_writing.fetch_add(1);
      return;
  }
}

bool HttpListener::Impl::ReserveBody(size_t bytes) {
  size_t held = buffered_body_bytes_.load();
  do {
    if (held + bytes > options_.max_buffered_body_bytes) {
      counts_.refused_body_budget.fetch_add(1);
      Log("http_body_budget_exhausted",
          absl::StrCat("a ", bytes, "-byte body refused (503): ", held,
                       " bytes of bodies are being received, http.max_buffered_body_bytes is ",
                       options_.max_buffered_body_bytes));
      return false;
    }
  } while (!buffered_body_bytes_.compare_exchange_weak(held, held + bytes));
  return true;
}

void HttpListener::Impl::ReleaseBody(size_t bytes) { buffered_body_bytes_.fetch_sub(bytes); }

HttpListenerCounters HttpListener::Impl::counters() const {
  HttpListenerCounters out;
  out.open_connections = open_connections();
  out.buffered_body_bytes = buffered_body_bytes_.load();
  out.accepted = counts_.accepted.load();
  out.refused_full = counts_.refused_full.load();
  out.refused_per_peer = counts_.refused_per_peer.load();
  out.evicted = counts_.evicted.load();
  out.timed_out_idle = counts_.timed_out_idle.load();
  out.timed_out_reading = counts_.timed_out_reading.load();
  out.timed_out_writing = counts_.timed_out_writing.load();
  out.refused_body_budget = counts_.refused_body_budget.load();
  return out;
}

void HttpListener::Impl::StopAccepting() {
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  asio::post(acceptor_.get_executor(), [this] {
    // Connections already in the kernel's backlog have sent (or are sending) a request:
    // serve them rather than let the close reset them.
    error_code ec;
    acceptor_.non_blocking(true, ec);
    while (!ec) {
      tcp::socket socket(asio::make_strand(ioc_));
      acceptor_.accept(socket, ec);
      if (!ec) Adopt(std::move(socket));
    }
    acceptor_.close(ec);
    backoff_.cancel();
  });
  for (const auto& c : Live()) asio::post(c->executor(), [c] { c->StopServing(); });
}

bool HttpListener::Impl::Stop(absl::Duration timeout) {
  if (threads_.empty()) return true;
  StopAccepting();
  const bool clean = AwaitNoConnections(timeout);
  if (!clean) {
    for (const auto& c : Live()) asio::post(c->executor(), [c] { c->Cut(); });
    AwaitNoConnections(absl::Seconds(1));
  }
  work_.reset();
  ioc_.stop();
  for (std::thread& t : threads_) t.join();
  threads_.clear();
  return clean;
}

HttpListener::HttpListener(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

HttpListener::~HttpListener() { impl_->Stop(absl::ZeroDuration()); }

absl::StatusOr<std::unique_ptr<HttpListener>> HttpListener::Start(HttpListenerOptions options,
                                                                  HttpRoutes* routes) {
  if (options.threads < 1) return absl::InvalidArgumentError("http listener: threads < 1");
  if (options.max_buffered_body_bytes < options.max_body_bytes) {
    return absl::InvalidArgumentError(
        "http listener: max_buffered_body_bytes is below max_body_bytes (no body would fit)");
  }
  auto impl = std::make_unique<Impl>(std::move(options), routes);
  if (absl::Status st = impl->Open(); !st.ok()) return st;
  impl->Launch();
  return std::unique_ptr<HttpListener>(new HttpListener(std::move(impl)));
}

int HttpListener::port() const { return impl_->port(); }

size_t HttpListener::open_connections() const { return impl_->open_connections(); }

HttpListenerCounters HttpListener::counters() const { return impl_->counters(); }

void HttpListener::StopAccepting() { impl_->StopAccepting(); }

void HttpListener::CloseConnectionsAfterReplies() { impl_->CloseConnectionsAfterReplies(); }

bool HttpListener::Stop(absl::Duration timeout) { return impl_->Stop(timeout); }

}  // namespace dllm
