// The HTTP listener over loopback sockets, with routes that answer at once or when a test
// says so: connection limits and deadlines, framing refusals, half-close, disconnects, stop.
#include "server/http/http_listener.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"

namespace dllm {
namespace {

HttpResponse Text(int status, std::string body) {
  HttpResponse r;
  r.status = status;
  r.content_type = "text/plain";
  r.body = std::move(body);
  return r;
}

// A reply the test completes (Finish) or watches being abandoned.
class ManualSource final : public HttpResponseSource {
 public:
  void Start(std::function<void()> wake) override {
    absl::MutexLock lock(&mu_);
    wake_ = std::move(wake);
  }
  HttpOutput Poll() override {
    absl::MutexLock lock(&mu_);
    HttpOutput out;
    if (ready_) {
      out.head = Text(200, "done");
      out.end = true;
      ready_ = false;
      wake_ = nullptr;  // the contract: no wake after the end (it holds the listener's executor)
    }
    return out;
  }
  void Abandon() override {
    absl::MutexLock lock(&mu_);
    wake_ = nullptr;
    abandoned = true;
  }
  void Finish() {
    absl::MutexLock lock(&mu_);
    ready_ = true;
    if (wake_) wake_();
  }
  std::atomic<bool> abandoned{false};

 private:
  absl::Mutex mu_;
  std::function<void()> wake_ ABSL_GUARDED_BY(mu_);
  bool ready_ ABSL_GUARDED_BY(mu_) = false;
};

class FakeRoutes final : public HttpRoutes {
 public:
  std::optional<HttpResponse> Precheck(const HttpRequestHead& head) override {
    if (head.Header("x-refuse")) return Text(403, "refused before the body");
    return std::nullopt;
  }
  HttpReply Handle(HttpRequest request) override {
    if (request.head.path == "/slow") {
      auto source = std::make_shared<ManualSource>();
      absl::MutexLock lock(&mu_);
      sources_.push_back(source);
      return HttpReply{{}, source};
    }
    return HttpReply{
        Text(200, absl::StrCat(request.head.method, " ", request.head.path, " ", request.body)),
        nullptr};
  }
  HttpResponse Refusal(const HttpRequestHead*, int status, std::string_view message,
                       std::string_view) override {
    return Text(status, std::string(message));
  }
  // The n-th /slow reply (0-based), once it exists (waits up to 5 s).
  std::shared_ptr<ManualSource> Source(size_t n) {
    absl::MutexLock lock(&mu_);
    auto ready = [this, n] {
      mu_.AssertHeld();
      return sources_.size() > n;
    };
    mu_.AwaitWithTimeout(absl::Condition(&ready), absl::Seconds(5));
    return sources_.size() > n ? sources_[n] : nullptr;
  }

 private:
  absl::Mutex mu_;
  std::vector<std::shared_ptr<ManualSource>> sources_ ABSL_GUARDED_BY(mu_);
};

class Client {
 public:
  // `from`: the source address (loopback holds all of 127/8, so a test has many peers).
  explicit Client(int port, const char* from = nullptr) : fd_(socket(AF_INET, SOCK_STREAM, 0)) {
    if (from != nullptr) {
      sockaddr_in local = {};
      local.sin_family = AF_INET;
      REQUIRE(inet_pton(AF_INET, from, &local.sin_addr) == 1);
      REQUIRE(bind(fd_, reinterpret_cast<sockaddr*>(&local), sizeof(local)) == 0);
    }
    sockaddr_in a = {};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
  }
  ~Client() {
    if (fd_ >= 0) close(fd_);
  }
  bool connected() const { return connected_; }
  int fd() const { return fd_; }
  void Send(std::string_view bytes) {
    REQUIRE(send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL) ==
            static_cast<ssize_t>(bytes.size()));
  }
  // Bytes until `done(received)` holds, the peer closes, or `timeout` passes.
  std::string Read(absl::Duration timeout,
                   const std::function<bool(const std::string&)>& done = nullptr) {
    std::string out;
    const absl::Time deadline = absl::Now() + timeout;
    while (!(done && done(out))) {
      const int64_t wait_ms = absl::ToInt64Milliseconds(deadline - absl::Now());
      if (wait_ms <= 0) break;
      pollfd p = {fd_, POLLIN, 0};
      if (poll(&p, 1, static_cast<int>(wait_ms)) != 1) break;
      char buf[4096];
      const ssize_t n = recv(fd_, buf, sizeof(buf), 0);
      if (n <= 0) {
        closed_ = true;
        break;
      }
      out.append(buf, static_cast<size_t>(n));
    }
    return out;
  }
  // One whole response (head and Content-Length body), or what came within 5 s.
  std::string ReadResponse() { return Read(absl::Seconds(5), Complete); }
  // True when the server closes the connection within `timeout`.
  bool ClosedWithin(absl::Duration timeout) {
    Read(timeout);
    return closed_;
  }

  static bool Complete(const std::string& s) {
    size_t start = 0;
    while (absl::StartsWith(s.substr(start), "HTTP/1.1 100 ")) {
      const size_t end = s.find("\r\n\r\n", start);
      if (end == std::string::npos) return false;
      start = end + 4;
    }
    const size_t end = s.find("\r\n\r\n", start);
    if (end == std::string::npos) return false;
    const size_t cl = s.find("Content-Length: ", start);
    if (cl == std::string::npos || cl > end) return true;
    size_t length = 0;
    const size_t eol = s.find("\r\n", cl);
    if (!absl::SimpleAtoi(s.substr(cl + 16, eol - cl - 16), &length)) return false;
    return s.size() >= end + 4 + length;
  }

 private:
  int fd_;
  bool connected_ = false;
  bool closed_ = false;
};

std::string Body(const std::string& response) {
  const size_t end = response.rfind("\r\n\r\n");
  return end == std::string::npos ? "" : response.substr(end + 4);
}

struct Fixture {
  explicit Fixture(HttpListenerOptions options = {}) {
    options.address = "127.0.0.1";
    options.port = 0;
    absl::StatusOr<std::unique_ptr<HttpListener>> started =
        HttpListener::Start(std::move(options), &routes);
    REQUIRE(started.ok());
    listener = *std::move(started);
  }
  FakeRoutes routes;
  std::unique_ptr<HttpListener> listener;
  int port() const { return listener->port(); }
};

TEST_CASE("http listener: malformed heads are described, naming the header") {
  CHECK(DescribeMalformedHead("GET / HTTP/1.1\r\nHost: x\r\n\r\n") == std::nullopt);
  CHECK(DescribeMalformedHead("GET / HTTP/1.1\r\nHost x\r\n\r\n") ==
        "header line 1 ('Host x') has no colon");
  CHECK(DescribeMalformedHead("GET / HTTP/1.1\r\nHost: x\r\nX-Probe: a\rb\r\n\r\n") ==
        "header X-Probe: control character in its value");
  CHECK(DescribeMalformedHead("GET / HTTP/1.1\r\nHost : x\r\n\r\n") ==
        "header Host : invalid character in its name (whitespace before the colon?)");
  CHECK(DescribeMalformedHead(
            "POST / HTTP/1.1\r\nContent-Length: 2\r\ncontent-length: 40\r\n\r\n{}") ==
        "more than one Content-Length header");
  CHECK(DescribeMalformedHead(
            "POST / HTTP/1.1\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n") ==
        "both Content-Length and Transfer-Encoding");
  CHECK(DescribeMalformedHead("GET / HTTP/1.1\r\n: x\r\n\r\n") ==
        "header line 1 (': x') has no name");
  CHECK(DescribeMalformedHead("GET / HTTP/1.1\r\nX-A: 1\r\n\t2\r\n\r\n") ==
        "header line 2 ('\\t2') continues the previous one (obsolete line folding)");
  CHECK(DescribeMalformedHead(
            "POST / HTTP/1.1\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\n{}") ==
        "more than one Content-Length header");
}

TEST_CASE("http listener: keep-alive and pipelined requests are answered in order") {
  Fixture f;
  Client c(f.port());
  REQUIRE(c.connected());
  c.Send(
      "GET /a HTTP/1.1\r\nHost: x\r\n\r\n"
      "POST /b HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nxyz");
  const std::string both = c.Read(
      absl::Seconds(5), [](const std::string& s) { return absl::EndsWith(s, "POST /b xyz"); });
  const size_t first = both.find("GET /a ");
  const size_t second = both.find("POST /b xyz");
  REQUIRE(first != std::string::npos);
  REQUIRE(second != std::string::npos);
  CHECK(first < second);
  CHECK(absl::StartsWith(both, "HTTP/1.1 200 OK\r\n"));
  CHECK(both.find("Connection: keep-alive") < first);
}

TEST_CASE("http listener: a request sent while a streamed reply is under way is answered") {
  // The next request on a keep-alive connection arrives before the reply is written, in the
  // same segment as the first (pipelined) or later (a client or proxy that sends as soon as it
  // has read the reply's head). Both used to wait for bytes that never came: lost.
  Fixture f;
  for (const bool same_segment : {true, false}) {
    INFO("same segment " << same_segment);
    Client c(f.port());
    REQUIRE(c.connected());
    if (same_segment) {
      c.Send("GET /slow HTTP/1.1\r\nHost: x\r\n\r\nGET /next HTTP/1.1\r\nHost: x\r\n\r\n");
    } else {
      c.Send("GET /slow HTTP/1.1\r\nHost: x\r\n\r\n");
    }
    std::shared_ptr<ManualSource> source = f.routes.Source(same_segment ? 0 : 1);
    REQUIRE(source != nullptr);
    if (!same_segment) c.Send("GET /next HTTP/1.1\r\nHost: x\r\n\r\n");
    absl::SleepFor(absl::Milliseconds(200));  // the listener has read the second request
    source->Finish();
    const std::string both = c.Read(
        absl::Seconds(5), [](const std::string& s) { return absl::EndsWith(s, "GET /next "); });
    CHECK(absl::StrContains(both, "\r\n\r\ndone"));
    CHECK(absl::EndsWith(both, "GET /next "));
    CHECK_FALSE(source->abandoned);
  }
}

TEST_CASE("http listener: a malformed request gets a 400 naming the problem, then a close") {
  Fixture f;
  for (const char* head :
       {"GET / HTTP/1.1\r\nHost x\r\n\r\n", "GET / HTTP/1.1\r\nHost: x\r\nX-Probe: a\rb\r\n\r\n",
        "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n"
        "Content-Length: 40\r\n\r\n{}"}) {
    INFO(head);
    Client c(f.port());
    c.Send(head);
    const std::string reply = c.ReadResponse();
    CHECK(absl::StartsWith(reply, "HTTP/1.1 400 Bad Request\r\n"));
    CHECK(reply.find("Connection: close") != std::string::npos);
    CHECK(DescribeMalformedHead(head) == Body(reply));
    CHECK(c.ClosedWithin(absl::Seconds(3)));
  }
}

TEST_CASE("http listener: Precheck refuses before the body is read") {
  Fixture f;
  Client c(f.port());
  c.Send("POST / HTTP/1.1\r\nHost: x\r\nX-Refuse: 1\r\nContent-Length: 100000000\r\n\r\n");
  const std::string reply = c.ReadResponse();
  CHECK(absl::StartsWith(reply, "HTTP/1.1 403 "));
  CHECK(Body(reply) == "refused before the body");
  CHECK(c.ClosedWithin(absl::Seconds(3)));
}

TEST_CASE("http listener: bodies over the limit are refused, by Content-Length or chunked") {
  HttpListenerOptions options;
  options.max_body_bytes = 10;
  Fixture f(options);
  {
    Client c(f.port());
    c.Send("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 11\r\n\r\n");
    CHECK(absl::StartsWith(c.ReadResponse(), "HTTP/1.1 413 "));
  }
  {
    Client c(f.port());
    c.Send("POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n8\r\n12345678\r\n");
    c.Send("8\r\n12345678\r\n0\r\n\r\n");
    CHECK(absl::StartsWith(c.ReadResponse(), "HTTP/1.1 413 "));
  }
  {
    Client c(f.port());
    c.Send(
        "POST /ok HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n");
    CHECK(Body(c.ReadResponse()) == "POST /ok abc");
  }
}

TEST_CASE("http listener: Expect: 100-continue gets its interim response before the body") {
  Fixture f;
  Client c(f.port());
  c.Send("POST /e HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nExpect: 100-continue\r\n\r\n");
  CHECK(c.Read(absl::Seconds(5), [](const std::string& s) { return s.size() >= 25; }) ==
        "HTTP/1.1 100 Continue\r\n\r\n");
  c.Send("hi");
  CHECK(Body(c.ReadResponse()) == "POST /e hi");
}

TEST_CASE("http listener: head and body share one deadline from the request's first byte") {
  // read_timeout 1 s. The head completes at 0.8 s and the body would at 1.4 s: the request
  // is closed at 1 s (the body's time used to start over when the head completed: 1.8 s).
  HttpListenerOptions options;
  options.read_timeout = absl::Seconds(1);
  Fixture f(options);
  Client c(f.port());
  REQUIRE(c.connected());
  c.Send("POST /late HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n");
  absl::SleepFor(absl::Milliseconds(800));
  c.Send("\r\n");
  absl::SleepFor(absl::Milliseconds(600));
  send(c.fd(), "abcd", 4, MSG_NOSIGNAL);  // may fail: the server has closed
  const std::string reply = c.Read(absl::Seconds(3));
  CHECK(reply.find("POST /late abcd") == std::string::npos);
  CHECK(c.ClosedWithin(absl::Seconds(1)));
}

TEST_CASE("http listener: slow and idle clients hold no thread, and their deadlines close them") {
  HttpListenerOptions options;
  options.threads = 1;
  options.read_timeout = absl::Milliseconds(800);
  options.idle_timeout = absl::Milliseconds(400);
  Fixture f(options);
  // Far more clients mid-request than there are threads (cpp-httplib needed one each).
  std::vector<std::unique_ptr<Client>> slow;
  for (int i = 0; i < 64; ++i) {
    slow.push_back(std::make_unique<Client>(f.port()));
    slow.back()->Send("GET / HTTP/1.1\r\nHost: x\r\nX-Slow: ");
  }
  std::vector<std::unique_ptr<Client>> idle;
  idle.reserve(64);
  for (int i = 0; i < 64; ++i) idle.push_back(std::make_unique<Client>(f.port()));
  {
    Client c(f.port());
    c.Send("GET /now HTTP/1.1\r\nHost: x\r\n\r\n");
    CHECK(Body(c.ReadResponse()) == "GET /now ");
  }
  // Each unfinished request ends at its read deadline, each idle connection at its idle one.
  for (auto& c : slow) CHECK(c->ClosedWithin(absl::Seconds(5)));
  for (auto& c : idle) CHECK(c->ClosedWithin(absl::Seconds(5)));
  // A closed connection is forgotten once its last pending handler has run.
  const absl::Time deadline = absl::Now() + absl::Seconds(5);
  while (f.listener->open_connections() > 0 && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  CHECK(f.listener->open_connections() == 0);
}

TEST_CASE("http listener: connections over max_connections are closed at once") {
  HttpListenerOptions options;
  options.max_connections = 2;
  Fixture f(options);
  Client a(f.port());
  Client b(f.port());
  a.Send("GET /a HTTP/1.1\r\nHost: x\r\n\r\n");
  b.Send("GET /b HTTP/1.1\r\nHost: x\r\n\r\n");
  CHECK(Body(a.ReadResponse()) == "GET /a ");
  CHECK(Body(b.ReadResponse()) == "GET /b ");
  Client third(f.port());
  CHECK(third.ClosedWithin(absl::Seconds(3)));
}

// Waits up to 5 s for `done(counters)`.
bool CountersReach(const HttpListener& listener,
                   const std::function<bool(const HttpListenerCounters&)>& done) {
  const absl::Time deadline = absl::Now() + absl::Seconds(5);
  while (!done(listener.counters())) {
    if (absl::Now() > deadline) return false;
    absl::SleepFor(absl::Milliseconds(10));
  }
  return true;
}

TEST_CASE("http listener: when full, the oldest connection without a request makes room") {
  HttpListenerOptions options;
  options.max_connections = 3;
  Fixture f(options);
  Client working(f.port());  // the oldest, but its request is being answered: never cut
  working.Send("GET /slow HTTP/1.1\r\nHost: x\r\n\r\n");
  REQUIRE(f.routes.Source(0) != nullptr);
  Client idle_old(f.port());
  Client idle_new(f.port());
  REQUIRE(CountersReach(*f.listener, [](const auto& c) { return c.open_connections == 3; }));
  {
    Client user(f.port());
    user.Send("GET /now HTTP/1.1\r\nHost: x\r\n\r\n");
    CHECK(Body(user.ReadResponse()) == "GET /now ");
    CHECK(idle_old.ClosedWithin(absl::Seconds(3)));
    CHECK_FALSE(idle_new.ClosedWithin(absl::Milliseconds(300)));
    // Full again, and the only connection without a request is idle_new.
    Client second(f.port());
    second.Send("GET /again HTTP/1.1\r\nHost: x\r\n\r\n");
    CHECK(Body(second.ReadResponse()) == "GET /again ");
    CHECK(idle_new.ClosedWithin(absl::Seconds(3)));
    // Now every open connection has sent a request: a new one is refused.
    Client refused(f.port());
    CHECK(refused.ClosedWithin(absl::Seconds(3)));
  }
  f.routes.Source(0)->Finish();
  CHECK(Body(working.ReadResponse()) == "done");
  const HttpListenerCounters counters = f.listener->counters();
  CHECK(counters.evicted == 2);
  CHECK(counters.refused_full == 1);
  CHECK(counters.accepted == 5);
}

TEST_CASE("http listener: a flood at the cap evicts while evicted connections close") {
  // Each new connection at the cap looks for the oldest without a request while the ones it
  // evicted close on other threads. The search took a reference to each connection it
  // passed; when it held the last one, the connection's destructor unregistered it under
  // the lock the search held: the listener died on a self-deadlock (one run in twenty of
  // the HTTP slow-connections test).
  HttpListenerOptions options;
  options.max_connections = 4;
  options.threads = 4;
  Fixture f(options);
  std::vector<std::unique_ptr<Client>> flood;
  for (int i = 0; i < 3000; ++i) {
    flood.push_back(std::make_unique<Client>(f.port()));
    if (flood.size() > 16) flood.erase(flood.begin());  // also close some from this side
    if (i % 100 == 0) {
      Client user(f.port());
      user.Send("GET /now HTTP/1.1\r\nHost: x\r\n\r\n");
      REQUIRE(Body(user.ReadResponse()) == "GET /now ");
    }
  }
  flood.clear();
  Client last(f.port());
  last.Send("GET /last HTTP/1.1\r\nHost: x\r\n\r\n");
  CHECK(Body(last.ReadResponse()) == "GET /last ");
  CHECK(f.listener->counters().evicted > 1000);
}

TEST_CASE("http listener: max_connections_per_peer caps one client address, not others") {
  HttpListenerOptions options;
  options.max_connections_per_peer = 2;
  Fixture f(options);
  Client a(f.port(), "127.0.0.1");
  Client b(f.port(), "127.0.0.1");
  REQUIRE(CountersReach(*f.listener, [](const auto& c) { return c.accepted == 2; }));
  Client over(f.port(), "127.0.0.1");
  CHECK(over.ClosedWithin(absl::Seconds(3)));
  Client other(f.port(), "127.0.0.2");
  other.Send("GET /other HTTP/1.1\r\nHost: x\r\n\r\n");
  CHECK(Body(other.ReadResponse()) == "GET /other ");
  CHECK(f.listener->counters().refused_per_peer == 1);
  // A closed connection frees its peer's slot.
  a.Send("GET /a HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  CHECK(Body(a.ReadResponse()) == "GET /a ");
  REQUIRE(CountersReach(*f.listener, [](const auto& c) { return c.open_connections == 2; }));
  Client again(f.port(), "127.0.0.1");
  again.Send("GET /again HTTP/1.1\r\nHost: x\r\n\r\n");
  CHECK(Body(again.ReadResponse()) == "GET /again ");
}

TEST_CASE("http listener: the head has a shorter deadline than the whole request") {
  HttpListenerOptions options;
  options.head_timeout = absl::Milliseconds(300);
  options.read_timeout = absl::Seconds(5);
  Fixture f(options);
  {
    Client trickle(f.port());
    trickle.Send("GET / HTTP/1.1\r\nHost: x\r\n");
    CHECK(trickle.ClosedWithin(absl::Seconds(3)));
    CHECK(f.listener->counters().timed_out_reading == 1);
  }
  // A body may take longer than the head's deadline (within read_timeout).
  Client upload(f.port());
  upload.Send("POST /up HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\nab");
  absl::SleepFor(absl::Milliseconds(600));
  upload.Send("cd");
  CHECK(Body(upload.ReadResponse()) == "POST /up abcd");
}

TEST_CASE("http listener: bodies being received share one budget; beyond it a 503") {
  HttpListenerOptions options;
  options.max_body_bytes = 100;
  options.max_buffered_body_bytes = 150;
  Fixture f(options);
  Client first(f.port());
  first.Send("POST /1 HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n0123456789");
  REQUIRE(CountersReach(*f.listener, [](const auto& c) { return c.buffered_body_bytes == 100; }));
  {
    Client over(f.port());
    over.Send("POST /2 HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n");
    const std::string reply = over.ReadResponse();
    CHECK(absl::StartsWith(reply, "HTTP/1.1 503 "));
    CHECK(absl::StrContains(reply, "Retry-After: 1\r\n"));
    CHECK(absl::StrContains(Body(reply), "http.max_buffered_body_bytes"));
    CHECK(over.ClosedWithin(absl::Seconds(3)));
    // A chunked body reserves max_body_bytes: it does not fit either.
    Client chunked(f.port());
    chunked.Send("POST /3 HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n");
    CHECK(absl::StartsWith(chunked.ReadResponse(), "HTTP/1.1 503 "));
  }
  {
    Client small(f.port());  // 100 + 50 fits
    small.Send("POST /4 HTTP/1.1\r\nHost: x\r\nContent-Length: 50\r\n\r\n");
    small.Send(std::string(50, 'x'));
    CHECK(Body(small.ReadResponse()) == "POST /4 " + std::string(50, 'x'));
  }
  first.Send(std::string(90, 'y'));
  CHECK(absl::StartsWith(Body(first.ReadResponse()), "POST /1 0123456789yyy"));
  // Every reservation is given back, also a connection's that leaves mid-body.
  {
    Client leaves(f.port());
    leaves.Send("POST /5 HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nabc");
    REQUIRE(CountersReach(*f.listener, [](const auto& c) { return c.buffered_body_bytes == 100; }));
  }
  CHECK(CountersReach(*f.listener, [](const auto& c) { return c.buffered_body_bytes == 0; }));
  CHECK(f.listener->counters().refused_body_budget == 2);
}

TEST_CASE("http listener: after CloseConnectionsAfterReplies every reply closes its connection") {
  Fixture f;
  Client c(f.port());
  c.Send("GET /a HTTP/1.1\r\nHost: x\r\n\r\n");
  CHECK(absl::StrContains(c.ReadResponse(), "Connection: keep-alive\r\n"));
  Client streamed(f.port());
  streamed.Send("GET /slow HTTP/1.1\r\nHost: x\r\n\r\n");
  REQUIRE(f.routes.Source(0) != nullptr);
  f.listener->CloseConnectionsAfterReplies();
  c.Send("GET /b HTTP/1.1\r\nHost: x\r\n\r\n");
  const std::string reply = c.ReadResponse();
  CHECK(Body(reply) == "GET /b ");
  CHECK(absl::StrContains(reply, "Connection: close\r\n"));
  CHECK(c.ClosedWithin(absl::Seconds(3)));
  // A reply under way when it was called closes too.
  f.routes.Source(0)->Finish();
  CHECK(absl::StrContains(streamed.ReadResponse(), "Connection: close\r\n"));
  CHECK(streamed.ClosedWithin(absl::Seconds(3)));
  // New connections are still served.
  Client fresh(f.port());
  fresh.Send("GET /c HTTP/1.1\r\nHost: x\r\n\r\n");
  CHECK(Body(fresh.ReadResponse()) == "GET /c ");
}

TEST_CASE("http listener: a client that half-closes after its request still gets the reply") {
  Fixture f;
  Client c(f.port());
  c.Send("GET /slow HTTP/1.1\r\nHost: x\r\n\r\n");
  REQUIRE(shutdown(c.fd(), SHUT_WR) == 0);
  std::shared_ptr<ManualSource> source = f.routes.Source(0);
  REQUIRE(source != nullptr);
  absl::SleepFor(absl::Milliseconds(300));  // the listener sees the FIN and probes
  CHECK_FALSE(source->abandoned);
  source->Finish();
  const std::string reply = c.ReadResponse();
  CHECK(absl::StartsWith(reply, "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\n"));
  CHECK(Body(reply) == "done");
  CHECK(c.ClosedWithin(absl::Seconds(3)));
  CHECK_FALSE(source->abandoned);
}

TEST_CASE("http listener: a client that goes away abandons its reply") {
  Fixture f;
  for (const bool reset : {false, true}) {
    INFO("reset " << reset);
    auto c = std::make_unique<Client>(f.port());
    c->Send("GET /slow HTTP/1.1\r\nHost: x\r\n\r\n");
    std::shared_ptr<ManualSource> source = f.routes.Source(reset ? 1 : 0);
    REQUIRE(source != nullptr);
    if (reset) {
      linger l = {1, 0};  // close() sends a reset
      setsockopt(c->fd(), SOL_SOCKET, SO_LINGER, &l, sizeof(l));
    }
    c.reset();  // a plain close looks like a half-close until the probe meets a reset
    const absl::Time deadline = absl::Now() + absl::Seconds(5);
    while (!source->abandoned && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(10));
    CHECK(source->abandoned);
  }
}

TEST_CASE("http listener: Stop closes idle connections and waits for replies under way") {
  Fixture f;
  Client idle(f.port());
  Client busy(f.port());
  busy.Send("GET /slow HTTP/1.1\r\nHost: x\r\n\r\n");
  std::shared_ptr<ManualSource> source = f.routes.Source(0);
  REQUIRE(source != nullptr);
  std::atomic<bool> clean{false};
  std::thread stopper([&] { clean = f.listener->Stop(absl::Seconds(10)); });
  CHECK(idle.ClosedWithin(absl::Seconds(3)));
  source->Finish();
  const std::string reply = busy.ReadResponse();
  stopper.join();
  CHECK(clean);
  CHECK(Body(reply) == "done");
  CHECK(reply.find("Connection: close") != std::string::npos);
  CHECK_FALSE(source->abandoned);
}

TEST_CASE("http listener: Stop cuts the replies still under way at its timeout") {
  Fixture f;
  Client busy(f.port());
  busy.Send("GET /slow HTTP/1.1\r\nHost: x\r\n\r\n");
  std::shared_ptr<ManualSource> source = f.routes.Source(0);
  REQUIRE(source != nullptr);
  CHECK_FALSE(f.listener->Stop(absl::Milliseconds(200)));
  CHECK(source->abandoned);
  CHECK(busy.ClosedWithin(absl::Seconds(3)));
}

}  // namespace
}  // namespace dllm
