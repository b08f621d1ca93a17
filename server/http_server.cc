#include "server/http_server.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <httplib.h>
#include <netdb.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <optional>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "engine/tokenizer/tokenizer.h"
#include "google/protobuf/util/json_util.h"
#include "server/engine_request_link.h"
#include "server/http_generation.h"
#include "server/http_openai_mapping.h"
#include "server/http_status_mapping.h"
#include "server/http_step_json.h"
#include "server/http_stop_sequences.h"
#include "server/playground_assets.h"
#include "server/response_mapping.h"
#include "server/status_mapping.h"

namespace dllm {
namespace {

constexpr char kJson[] = "application/json";
using nlohmann::json;

// ------------------------------------------------------------ the client's socket
//
// Debian's cpp-httplib (0.11) tells a handler neither its socket nor whether the peer went
// away (DataSink::is_writable only asks select() whether a write would block). To cancel
// within one engine step we need to notice a closed connection while nothing is written,
// so the handler finds its own connection's socket once, by its address pair, among the
// process's descriptors. The connection thread owns the socket until the handler returns.

std::optional<std::pair<std::string, int>> NumericAddress(const sockaddr_storage& a,
                                                          socklen_t len) {
  char host[NI_MAXHOST];
  char serv[NI_MAXSERV];
  if (getnameinfo(reinterpret_cast<const sockaddr*>(&a), len, host, sizeof(host), serv,
                  sizeof(serv), NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
    return std::nullopt;
  }
  int port = 0;
  if (!absl::SimpleAtoi(serv, &port)) return std::nullopt;
  return std::make_pair(std::string(host), port);
}

int FindConnectionSocket(const httplib::Request& req) {
  if (req.ssl != nullptr) return SSL_get_fd(req.ssl);
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return -1;
  int found = -1;
  while (dirent* entry = readdir(dir)) {
    int fd = -1;
    if (!absl::SimpleAtoi(entry->d_name, &fd) || fd == dirfd(dir)) continue;
    sockaddr_storage local = {};
    socklen_t local_len = sizeof(local);
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_len) != 0) continue;
    if (local.ss_family != AF_INET && local.ss_family != AF_INET6) continue;
    const auto local_addr = NumericAddress(local, local_len);
    if (!local_addr || local_addr->second != req.local_port) continue;
    sockaddr_storage peer = {};
    socklen_t peer_len = sizeof(peer);
    if (getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peer_len) != 0) continue;
    const auto peer_addr = NumericAddress(peer, peer_len);
    if (peer_addr && peer_addr->second == req.remote_port && peer_addr->first == req.remote_addr) {
      found = fd;
      break;
    }
  }
  closedir(dir);
  return found;
}

// ------------------------------------------------------------ handlers

class Handlers {
 public:
  Handlers(const ServerConfig& config, DiffusionService* service, Logger* logger)
      : service_(service), logger_(logger), model_name_(config.http.model_name) {
    if (model_name_.empty()) {
      model_name_ = std::filesystem::path(config.engine.model).lexically_normal().filename();
      if (model_name_.empty()) {
        model_name_ =
            std::filesystem::path(config.engine.model).lexically_normal().parent_path().filename();
      }
      if (model_name_.empty()) model_name_ = "dllm";
    }
  }

  void Install(httplib::Server* server) {
    server->Get("/health", [this](const httplib::Request&, httplib::Response& res) {
      const bool serving = service_->Serving();
      res.status = serving ? 200 : 503;
      res.set_content(serving ? R"({"status":"serving"})" : R"({"status":"not_serving"})", kJson);
    });
    server->Get("/v1/models", [this](const httplib::Request& req, httplib::Response& res) {
      Engine* engine = nullptr;
      if (absl::Status st = service_->CheckAvailable(Authorization(req), &engine); !st.ok()) {
        return SendError(res, st);
      }
      res.set_content(DumpJson(ModelListJson(model_name_, Created())), kJson);
    });
    server->Get(R"(/v1/models/(.+))", [this](const httplib::Request& req, httplib::Response& res) {
      Engine* engine = nullptr;
      if (absl::Status st = service_->CheckAvailable(Authorization(req), &engine); !st.ok()) {
        return SendError(res, st);
      }
      if (req.matches[1] != model_name_) {
        return SendError(res, ModelNotFound(req.matches[1].str()));
      }
      res.set_content(DumpJson(ModelListJson(model_name_, Created())["data"][0]), kJson);
    });
    // Diffusion-specific: GetModelInfo's answer (model, effective defaults, limits) as JSON,
    // with proto field names; the playground reads its knobs' ranges from it.
    server->Get("/v1/dllm/model_info", [this](const httplib::Request& req, httplib::Response& res) {
      v1::GetModelInfoResponse info;
      if (absl::Status st = service_->DescribeModel(Authorization(req), &info); !st.ok()) {
        return SendError(res, st);
      }
      google::protobuf::util::JsonPrintOptions options;
      options.always_print_primitive_fields = true;
      options.preserve_proto_field_names = true;
      std::string body;
      if (!google::protobuf::util::MessageToJsonString(info, &body, options).ok()) {
        return SendError(res, absl::InternalError("model info: cannot render as JSON"));
      }
      json out = json::parse(body, nullptr, /*allow_exceptions=*/false);
      out.erase("model_dir");  // a server path: nothing a browser needs
      out["model"] = model_name_;
      res.set_content(DumpJson(out), kJson);
    });
    // The playground: static files compiled into the binary, no token needed (they hold no
    // data; every API call they make carries the token the page asks for).
    for (const PlaygroundAsset& asset : PlaygroundAssets()) {
      const std::string path =
          asset.name == "index.html" ? std::string("/") : "/playground/" + std::string(asset.name);
      server->Get(path, [asset](const httplib::Request&, httplib::Response& res) {
        res.set_header("Cache-Control", "no-cache");
        res.set_header("X-Content-Type-Options", "nosniff");
        res.set_header("Content-Security-Policy",
                       "default-src 'self'; img-src 'self' data:; object-src 'none'; "
                       "base-uri 'none'; frame-ancestors 'none'");
        res.set_content(std::string(asset.body), std::string(asset.content_type).c_str());
      });
    }
    server->Post("/v1/chat/completions",
                 [this](const httplib::Request& req, httplib::Response& res) {
                   Generate(OpenAiEndpoint::kChatCompletions, "ChatCompletions", req, res);
                 });
    server->Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
      Generate(OpenAiEndpoint::kCompletions, "Completions", req, res);
    });
    // Before cpp-httplib reads a body: refuse what must never be read. It inflates gzip
    // bodies and reads chunked ones without a size limit (only Content-Length is checked
    // against max_receive_message_bytes), and an unauthenticated caller must not make the
    // server read anything. Also refuse framing that proxies and we might read differently
    // (RFC 9112 section 6.3): duplicate Content-Length, control characters in header values.
    server->set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
      return Precheck(req, res) ? httplib::Server::HandlerResponse::Unhandled
                                : httplib::Server::HandlerResponse::Handled;
    });
    // Routing misses and cpp-httplib's own rejections (413 body too large, 400 bad request)
    // arrive here with an empty body: give them the OpenAI error shape too.
    server->set_error_handler(httplib::Server::HandlerWithResponse(
        [](const httplib::Request& req, httplib::Response& res) {
          if (!res.body.empty() || res.get_header_value("Connection") == "close") {
            return httplib::Server::HandlerResponse::Unhandled;  // answered (RespondAndClose)
          }
          std::string message;
          std::string type = "invalid_request_error";
          std::string code;
          switch (res.status) {
            case 404:
              message = absl::StrCat("no route for ", req.method, " ", req.path);
              type = "not_found_error";
              code = "not_found";
              break;
            case 413:
              message = "request body too large (server.max_receive_message_bytes)";
              code = "payload_too_large";
              break;
            case 405:
              message = absl::StrCat("method ", req.method, " not allowed on ", req.path);
              code = "method_not_allowed";
              break;
            default:
              message = absl::StrCat("HTTP ", res.status);
              if (res.status >= 500) type = "internal_error";
              break;
          }
          res.set_content(HttpErrorBody(message, type, code), kJson);
          return httplib::Server::HandlerResponse::Handled;
        }));
    server->set_exception_handler(
        [this](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
          std::string what = "unknown exception";
          try {
            if (ep) std::rethrow_exception(ep);
          } catch (const std::exception& e) {
            what = e.what();
          } catch (...) {
          }
          logger_->Error("http_exception", {{"error", what}});
          SendError(res, absl::InternalError(what));
        });
  }

 private:
  // Answers with `body` and closes the connection. cpp-httplib 0.11 has no way to close a
  // keep-alive connection from a handler, and the unread body of a refused request would be
  // parsed as the next one: the content provider writes the whole body, then reports a
  // failure, which makes cpp-httplib drop the connection after the response.
  static void RespondAndClose(httplib::Response& res, int status, std::string body) {
    res.status = status;
    res.set_header("Connection", "close");
    const size_t size = body.size();
    res.set_content_provider(
        size, kJson,
        [body = std::move(body)](size_t offset, size_t length, httplib::DataSink& sink) {
          if (offset < body.size()) {
            sink.write(body.data() + offset, std::min(length, body.size() - offset));
          }
          return false;
        });
  }

  // False when the request was answered here (its body unread; the connection then closes,
  // since the unread body would otherwise be taken for the next request).
  bool Precheck(const httplib::Request& req, httplib::Response& res) {
    const char* method = req.path == "/v1/chat/completions" ? "ChatCompletions"
                         : req.path == "/v1/completions"    ? "Completions"
                                                            : nullptr;
    auto refuse = [&](int http_status, std::string_view message, std::string_view code,
                      grpc::StatusCode grpc_code) {
      if (method != nullptr && req.method == "POST") {
        service_->RecordCall(method, service_->LogId(v1::GenerateRequest()),
                             grpc::Status(grpc_code, std::string(message)), nullptr, absl::Now(),
                             "http");
      }
      RespondAndClose(res, http_status, HttpErrorBody(message, "invalid_request_error", code));
      return false;
    };
    for (const auto& [name, value] : req.headers) {
      for (const char c : value) {
        if (c == '\r' || c == '\n' || c == '\0') {
          return refuse(400, absl::StrCat("header ", name, ": control character in its value"),
                        "bad_header", grpc::StatusCode::INVALID_ARGUMENT);
        }
      }
    }
    if (req.get_header_value_count("Content-Length") > 1) {
      return refuse(400, "more than one Content-Length header", "bad_header",
                    grpc::StatusCode::INVALID_ARGUMENT);
    }
    if (req.has_header("Transfer-Encoding")) {
      return refuse(411,
                    "Transfer-Encoding request bodies (chunked) are not accepted: send "
                    "Content-Length",
                    "length_required", grpc::StatusCode::INVALID_ARGUMENT);
    }
    if (req.has_header("Content-Encoding") &&
        !absl::EqualsIgnoreCase(req.get_header_value("Content-Encoding"), "identity")) {
      return refuse(415,
                    absl::StrCat("Content-Encoding '", req.get_header_value("Content-Encoding"),
                                 "' is not accepted: send the request body uncompressed"),
                    "unsupported_encoding", grpc::StatusCode::INVALID_ARGUMENT);
    }
    if (method != nullptr && req.method == "POST") {
      Engine* engine = nullptr;
      if (absl::Status st = service_->CheckAvailable(Authorization(req), &engine); !st.ok()) {
        service_->RecordCall(method, service_->LogId(v1::GenerateRequest()), ToGrpcStatus(st),
                             nullptr, absl::Now(), "http");
        RespondAndClose(res, ToHttpError(st).status, HttpErrorBody(st));
        return false;
      }
    }
    return true;
  }

  static std::optional<std::string_view> Authorization(const httplib::Request& req) {
    auto it = req.headers.find("Authorization");
    if (it == req.headers.end()) return std::nullopt;
    return std::string_view(it->second);
  }

  static int64_t Created() { return absl::ToUnixSeconds(absl::Now()); }

  static absl::Status ModelNotFound(const std::string& model) {
    return absl::NotFoundError(absl::StrCat("model: '", model, "' is not served here"));
  }

  static void SendError(httplib::Response& res, const absl::Status& status) {
    res.status = ToHttpError(status).status;
    // 429 is overload only (a full queue): worth retrying soon. Requests that can never fit
    // are 400s, which SDKs do not retry.
    if (res.status == 429) res.set_header("Retry-After", "1");
    res.set_content(HttpErrorBody(status), kJson);
  }

  void Generate(OpenAiEndpoint endpoint, const char* method, const httplib::Request& req,
                httplib::Response& res) {
    const absl::Time start = absl::Now();
    const std::string log_id = service_->LogId(v1::GenerateRequest());
    auto reject = [&](const absl::Status& status) {
      service_->RecordCall(method, log_id, ToGrpcStatus(status), nullptr, start, "http");
      SendError(res, status);
    };
    Engine* engine = nullptr;
    if (absl::Status st = service_->CheckAvailable(Authorization(req), &engine); !st.ok()) {
      return reject(st);
    }
    absl::StatusOr<OpenAiRequest> parsed = ParseOpenAiRequest(endpoint, req.body);
    if (!parsed.ok()) return reject(parsed.status());
    if (parsed->model != model_name_) return reject(ModelNotFound(parsed->model));
    absl::StatusOr<DiffusionService::Admitted> admitted =
        service_->Admit(Authorization(req), absl::InfiniteFuture(), parsed->request, log_id);
    if (!admitted.ok()) return reject(RenameFieldInError(admitted.status(), *parsed));
    admitted->request.step_events = parsed->include_steps;

    auto call = std::make_shared<HttpGeneration>(service_, method, log_id, start);
    absl::StatusOr<RequestId> id = admitted->engine->Submit(std::move(admitted->request), call);
    if (!id.ok()) return reject(RenameFieldInError(id.status(), *parsed));
    call->link().Bind(admitted->engine, *id, absl::InfiniteFuture());

    const std::string response_id =
        absl::StrCat(endpoint == OpenAiEndpoint::kChatCompletions ? "chatcmpl-" : "cmpl-", log_id);
    const int64_t created = Created();
    const int fd = FindConnectionSocket(req);
    if (parsed->stream) {
      Stream(std::move(call), *std::move(parsed), response_id, created, fd, &engine->tokenizer(),
             res);
    } else {
      Unary(*call, *parsed, response_id, created, fd, res);
    }
  }

  // Passes committed deltas through the request's stop strings; ends the engine request as
  // soon as one is found. Returns the text to emit.
  static std::string ApplyStops(HttpGeneration& call, StopSequences& stops,
                                const std::string& delta) {
    if (stops.empty()) return delta;
    std::string out = stops.Append(delta);
    if (stops.stopped()) call.StopBySequence();
    return out;
  }

  // With stop strings the answer is what passed them; finish_reason "stop" when one matched.
  static void ApplyStopsToFinal(StopSequences& stops, const std::string& emitted,
                                v1::GenerateResponse* final) {
    if (stops.empty()) return;
    final->set_text(emitted + stops.Finish());
    if (stops.stopped()) final->set_finish_reason(v1::FINISH_REASON_EOS);
  }

  // Waits for the final event, cancelling the engine request if the client goes away.
  static void Unary(HttpGeneration& call, const OpenAiRequest& request,
                    const std::string& response_id, int64_t created, int fd,
                    httplib::Response& res) {
    StopSequences stops(request.stop);
    std::string text;
    bool cancelled = false;
    for (;;) {
      const bool alive = call.WaitForEvents(cancelled ? -1 : fd);
      if (!alive && !cancelled) {
        call.link().Cancel();  // the engine ends it within one step; wait for that
        cancelled = true;
      }
      HttpGeneration::Taken taken = call.Take();
      for (const HttpGeneration::Item& item : taken.items) {
        if (!item.step) text += ApplyStops(call, stops, item.delta);
      }
      if (!taken.final) continue;
      if (!taken.status.ok()) return SendError(res, taken.status);
      ApplyStopsToFinal(stops, text, &*taken.final);
      res.set_content(DumpJson(CompletionResponseJson(request, response_id, created, *taken.final)),
                      kJson);
      return;
    }
  }

  // `tokenizer` (the engine's) renders step events' tokens; it outlives every request.
  static void Stream(std::shared_ptr<HttpGeneration> call, OpenAiRequest request,
                     std::string response_id, int64_t created, int fd, const Tokenizer* tokenizer,
                     httplib::Response& res) {
    res.set_header("Cache-Control", "no-cache");
    res.set_header("X-Accel-Buffering", "no");
    struct State {
      explicit State(std::vector<std::string> stop) : stops(std::move(stop)) {}
      bool first = true;  // the role chunk is still to send
      StopSequences stops;
      std::string emitted;  // only kept when there are stop strings
    };
    auto state = std::make_shared<State>(request.stop);
    auto send = [](httplib::DataSink& sink, const std::string& payload) {
      const std::string event = absl::StrCat("data: ", payload, "\n\n");
      return sink.write(event.data(), event.size());
    };
    res.set_chunked_content_provider(
        "text/event-stream",
        [call, request = std::move(request), response_id = std::move(response_id), created, fd,
         state, send, tokenizer](size_t, httplib::DataSink& sink) {
          auto send_delta = [&](const std::string& text) {
            return send(sink, DumpJson(DeltaChunkJson(request, response_id, created, text,
                                                      /*first=*/false)));
          };
          if (state->first) {
            state->first = false;
            if (!send(sink, DumpJson(DeltaChunkJson(request, response_id, created, "", true)))) {
              return false;
            }
          }
          for (;;) {
            HttpGeneration::Taken taken = call->Take();
            bool wrote = false;
            for (const HttpGeneration::Item& item : taken.items) {
              if (item.step) {
                if (!request.include_steps) continue;
                if (!send(sink, DumpJson(StepEventJson(*item.step, *tokenizer, response_id,
                                                       !item.provisional_dropped)))) {
                  return false;
                }
                wrote = true;
                continue;
              }
              const std::string text = ApplyStops(*call, state->stops, item.delta);
              if (text.empty()) continue;
              if (!state->stops.empty()) state->emitted += text;
              if (!send_delta(text)) return false;  // the releaser cancels the engine request
              wrote = true;
            }
            if (taken.final) {
              if (taken.status.ok() && !state->stops.empty()) {
                const std::string rest = state->stops.Finish();
                if (!rest.empty() && !send_delta(rest)) return false;
                ApplyStopsToFinal(state->stops, state->emitted + rest, &*taken.final);
              }
              const std::string last =
                  taken.status.ok()
                      ? DumpJson(FinalChunkJson(request, response_id, created, *taken.final))
                      : HttpErrorBody(taken.status);
              if (!send(sink, last) || !send(sink, "[DONE]")) return false;
              sink.done();
              return true;
            }
            if (wrote) return true;                      // let cpp-httplib flush and call again
            if (!call->WaitForEvents(fd)) return false;  // client gone
          }
        },
        [call](bool success) {
          if (!success) call->link().Cancel();
        });
  }

  DiffusionService* const service_;
  Logger* const logger_;
  std::string model_name_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(const ServerConfig& config,
                                                              DiffusionService* service,
                                                              Logger* logger) {
  std::unique_ptr<HttpServer> out(new HttpServer());
  if (config.tls.enabled()) {
    for (const auto& [key, path] :
         {std::pair<const char*, const std::string*>{"tls.cert", &config.tls.cert},
          {"tls.key", &config.tls.key},
          {"tls.client_ca", &config.tls.client_ca}}) {
      if (!path->empty() && access(path->c_str(), R_OK) != 0) {
        return absl::NotFoundError(absl::StrCat(key, ": cannot read '", *path, "'"));
      }
    }
    auto ssl = std::make_unique<httplib::SSLServer>(
        config.tls.cert.c_str(), config.tls.key.c_str(),
        config.tls.client_ca.empty() ? nullptr : config.tls.client_ca.c_str());
    if (!ssl->is_valid()) {
      return absl::InvalidArgumentError(
          "tls: the HTTP listener cannot use tls.cert/tls.key/tls.client_ca");
    }
    out->server_ = std::move(ssl);
  } else {
    out->server_ = std::make_unique<httplib::Server>();
  }
  httplib::Server& server = *out->server_;
  const size_t threads = static_cast<size_t>(config.http.threads);
  server.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  server.set_payload_max_length(static_cast<size_t>(config.server.max_receive_message_bytes));
  // Idle keep-alive connections hold a thread and delay Stop by up to the timeout; a timeout
  // shorter than a client's idle timeout makes it reuse sockets the server just closed
  // (connection resets). cpp-httplib's default (5 s, advertised in Keep-Alive) is the
  // compromise; allow many requests per connection.
  server.set_keep_alive_timeout(5);
  server.set_keep_alive_max_count(1000);
  server.set_tcp_nodelay(true);  // SSE events go out as they are written
  auto handlers = std::make_shared<Handlers>(config, service, logger);
  handlers->Install(&server);  // the routes capture `handlers`; out keeps them alive
  out->handlers_ = handlers;

  const int port =
      server.bind_to_port(config.http.address, config.http.port) ? config.http.port : -1;
  if (port <= 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen for HTTP on ", config.http.address, ":", config.http.port));
  }
  out->port_ = port;
  HttpServer* self = out.get();
  out->thread_ = std::thread([&server, self] {
    server.listen_after_bind();  // returns once every connection thread has finished
    self->listen_returned_.Notify();
  });
  // stop() only acts on a running server: make sure Stop can never miss it.
  while (!server.is_running()) absl::SleepFor(absl::Milliseconds(1));
  return out;
}

HttpServer::~HttpServer() { Stop(); }

void HttpServer::Stop() { Stop(absl::InfiniteDuration()); }

bool HttpServer::Stop(absl::Duration timeout) {
  if (server_ != nullptr) server_->stop();
  if (!thread_.joinable()) return true;
  if (!listen_returned_.WaitForNotificationWithTimeout(timeout)) {
    // Connection threads still run against server_ and handlers_: never free them.
    thread_.detach();
    (void)server_.release();
    new std::shared_ptr<void>(std::move(handlers_));
    return false;
  }
  thread_.join();
  return true;
}

}  // namespace dllm
