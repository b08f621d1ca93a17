#include "server/http/metrics_endpoint.h"

#include <prometheus/text_serializer.h>

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "server/http/http_listener.h"

namespace dllm {

namespace {

HttpResponse Plain(int status, std::string body) {
  HttpResponse r;
  r.status = status;
  r.content_type = "text/plain; charset=utf-8";
  r.body = std::move(body);
  return r;
}

}  // namespace

class MetricsEndpoint::Routes final : public HttpRoutes {
 public:
  void Register(std::weak_ptr<prometheus::Collectable> collectable) {
    absl::MutexLock lock(&mu_);
    collectables_.push_back(std::move(collectable));
  }

  std::optional<HttpResponse> Precheck(const HttpRequestHead& head) override {
    if (head.path != "/metrics") return Plain(404, "not found: the metrics are at /metrics\n");
    if (head.method != "GET" && head.method != "HEAD") {
      HttpResponse r = Plain(405, "method not allowed: /metrics takes GET\n");
      r.headers.emplace_back("Allow", "GET, HEAD");
      return r;
    }
    const std::optional<std::string_view> length = head.Header("Content-Length");
    if (head.Header("Transfer-Encoding") || (length && *length != "0")) {
      return Plain(413, "/metrics takes no request body\n");
    }
    return std::nullopt;
  }

  HttpReply Handle(HttpRequest request) override {
    std::vector<std::shared_ptr<prometheus::Collectable>> live;
    {
      absl::MutexLock lock(&mu_);
      for (auto it = collectables_.begin(); it != collectables_.end();) {
        if (std::shared_ptr<prometheus::Collectable> c = it->lock()) {
          live.push_back(std::move(c));
          ++it;
        } else {
          it = collectables_.erase(it);
        }
      }
    }
    std::vector<prometheus::MetricFamily> families;
    for (const auto& c : live) {
      std::vector<prometheus::MetricFamily> more = c->Collect();
      families.insert(families.end(), std::make_move_iterator(more.begin()),
                      std::make_move_iterator(more.end()));
    }
    HttpResponse r = Plain(200, prometheus::TextSerializer().Serialize(families));
    r.content_type = "text/plain; version=0.0.4; charset=utf-8";
    return HttpReply{std::move(r), nullptr};
  }

  HttpResponse Refusal(const HttpRequestHead*, int status, std::string_view message,
                       std::string_view) override {
    return Plain(status, std::string(message) + "\n");
  }

 private:
  absl::Mutex mu_;
  std::vector<std::weak_ptr<prometheus::Collectable>> collectables_ ABSL_GUARDED_BY(mu_);
};

MetricsEndpoint::MetricsEndpoint() : routes_(std::make_unique<Routes>()) {}

MetricsEndpoint::~MetricsEndpoint() {
  if (listener_ != nullptr) listener_->Stop(absl::ZeroDuration());
}

absl::StatusOr<std::unique_ptr<MetricsEndpoint>> MetricsEndpoint::Start(const std::string& address,
                                                                        int port) {
  std::unique_ptr<MetricsEndpoint> out(new MetricsEndpoint());
  HttpListenerOptions options;
  options.address = address;
  options.port = port;
  // A scrape is one small request; one thread serves many scrapers. Idle connections close
  // after the listener's idle timeout, or make room for a scrape when the cap is reached.
  options.threads = 1;
  options.max_connections = 256;
  options.max_body_bytes = 0;
  options.max_buffered_body_bytes = 0;
  options.head_timeout = absl::Seconds(5);
  options.read_timeout = absl::Seconds(5);
  options.write_timeout = absl::Seconds(10);
  absl::StatusOr<std::unique_ptr<HttpListener>> listener =
      HttpListener::Start(std::move(options), out->routes_.get());
  if (!listener.ok()) {
    return absl::Status(listener.status().code(),
                        absl::StrCat("metrics: ", listener.status().message()));
  }
  out->listener_ = *std::move(listener);
  return out;
}

void MetricsEndpoint::Register(std::weak_ptr<prometheus::Collectable> collectable) {
  routes_->Register(std::move(collectable));
}

int MetricsEndpoint::port() const { return listener_->port(); }

}  // namespace dllm
