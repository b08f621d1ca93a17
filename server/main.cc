// dllm-server: serves one diffusion LM over gRPC (dllm.v1.DiffusionLM), with the standard
// health service, server reflection and a Prometheus /metrics endpoint.
//
// Start-up: parse config and flags → listen (health NOT_SERVING, calls UNAVAILABLE) → load
// the model → warm-up generation → SERVING. SIGTERM/SIGINT: NOT_SERVING, new calls
// UNAVAILABLE, in-flight requests drain for up to server.drain_timeout_seconds, the rest
// are cancelled, exit 0. Exit codes: 0 clean shutdown, 1 start-up failure, 2 bad usage.
#include <fcntl.h>
#include <google/protobuf/stubs/logging.h>
#include <grpc/support/log.h>
#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <malloc.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "engine/engine.h"
#include "server/auth.h"
#include "server/command_line.h"
#include "server/config.h"
#include "server/gateway.h"
#include "server/grpc/diffusion_service.h"
#include "server/grpc/grpc_listener.h"
#include "server/grpc/tls_credentials.h"
#include "server/http/http_server.h"
#include "server/http/metrics_endpoint.h"
#include "server/logger.h"
#include "server/metrics.h"
#include "server/process_metrics.h"
#include "server/server_flags.h"
#include "server/warmup.h"

namespace dllm {
namespace {

constexpr absl::Duration kWarmupTimeout = absl::Minutes(10);

// Self-pipe for SIGTERM/SIGINT. A handler (rather than blocking the signals and sigwait)
// is needed because libraries start threads before main() (OpenBLAS does), and a signal
// delivered to such a thread would take the default action and kill the process. This is
// the one piece of global state: a signal handler can reach nothing else.
int g_signal_pipe[2] = {-1, -1};

void OnStopSignal(int signal_number) {
  const int saved_errno = errno;
  const char byte = static_cast<char>(signal_number);
  (void)!write(g_signal_pipe[1], &byte, 1);
  errno = saved_errno;
}

absl::Status InstallStopSignalHandlers() {
  if (pipe2(g_signal_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
    return absl::InternalError("cannot create the signal pipe");
  }
  // The read end blocks; the write end stays non-blocking so the handler never stalls.
  fcntl(g_signal_pipe[0], F_SETFL, fcntl(g_signal_pipe[0], F_GETFL) & ~O_NONBLOCK);
  struct sigaction action = {};
  action.sa_handler = OnStopSignal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  if (sigaction(SIGTERM, &action, nullptr) != 0 || sigaction(SIGINT, &action, nullptr) != 0) {
    return absl::InternalError("cannot install the SIGTERM/SIGINT handlers");
  }
  return absl::OkStatus();
}

// True when a stop signal arrived already (e.g. while the model was loading).
bool StopSignalPending() {
  pollfd fd = {g_signal_pipe[0], POLLIN, 0};
  return poll(&fd, 1, 0) == 1;
}

// Waits up to `timeout` for another stop signal; true if one came.
bool WaitForStopSignalFor(absl::Duration timeout) {
  pollfd fd = {g_signal_pipe[0], POLLIN, 0};
  const absl::Time deadline = absl::Now() + timeout;
  for (;;) {
    const int64_t wait_ms = absl::ToInt64Milliseconds(deadline - absl::Now());
    if (wait_ms <= 0) return false;
    const int n = poll(&fd, 1, static_cast<int>(std::min<int64_t>(wait_ms, 1 << 30)));
    if (n == 1) return true;
    if (n < 0 && errno != EINTR) return false;
  }
}

// Blocks until SIGTERM or SIGINT arrives (also if it arrived earlier, e.g. during loading).
int WaitForStopSignal() {
  char byte = 0;
  while (read(g_signal_pipe[0], &byte, 1) != 1) {
    if (errno != EINTR) return 0;
  }
  return byte;
}
constexpr auto kShutdownGrace = std::chrono::seconds(5);
constexpr absl::Duration kFinalFlush = absl::Milliseconds(100);
constexpr absl::Duration kGrpcCloseWait = absl::Seconds(1);
constexpr absl::Duration kAcceptedConnectionGrace = absl::Milliseconds(200);

// gRPC and protobuf log through their own global hooks; route them into the server's logger
// so that a JSON log stays JSON (a raw "E1130 chttp2_server.cc ..." or "[libprotobuf ERROR]"
// line used to appear in it). Set while the logger lives; null means stderr as before.
std::atomic<Logger*> g_library_logger{nullptr};

void LogLibraryLine(LogLevel level, const char* library, const char* file, int line,
                    std::string_view message) {
  Logger* logger = g_library_logger.load();
  if (logger == nullptr) {
    std::cerr << library << " " << file << ":" << line << " " << message << "\n";
    return;
  }
  logger->Log(level, "library_log",
              {{"library", std::string(library)},
               {"file", std::string(file != nullptr ? file : "")},
               {"line", int64_t{line}},
               {"message", std::string(message)}});
}

void RouteGrpcLog(gpr_log_func_args* args) {
  const LogLevel level = args->severity == GPR_LOG_SEVERITY_ERROR  ? LogLevel::kError
                         : args->severity == GPR_LOG_SEVERITY_INFO ? LogLevel::kInfo
                                                                   : LogLevel::kDebug;
  LogLibraryLine(level, "grpc", args->file, args->line, args->message);
}

void RouteProtobufLog(google::protobuf::LogLevel severity, const char* file, int line,
                      const std::string& message) {
  const LogLevel level = severity >= google::protobuf::LOGLEVEL_ERROR     ? LogLevel::kError
                         : severity == google::protobuf::LOGLEVEL_WARNING ? LogLevel::kWarning
                                                                          : LogLevel::kInfo;
  LogLibraryLine(level, "protobuf", file, line, message);
}

// Reads the command line and the config file it names, then applies the flags over it.
// Returns the exit code when the process ends here (bad usage, --help, an unusable config).
std::optional<int> LoadConfig(int argc, char** argv, ServerConfig* config) {
  absl::StatusOr<CommandLine> cl =
      ParseCommandLine(std::vector<std::string>(argv + 1, argv + argc));
  if (!cl.ok()) {
    std::cerr << "dllm-server: " << cl.status().message() << "\n" << CommandLineUsage();
    return 2;
  }
  if (cl->help) {
    std::cout << CommandLineUsage();
    return 0;
  }
  if (cl->config_path) {
    absl::StatusOr<ServerConfig> loaded = LoadServerConfig(*cl->config_path);
    if (!loaded.ok()) {
      std::cerr << "dllm-server: " << loaded.status().message() << "\n";
      return 1;
    }
    *config = *std::move(loaded);
  }
  if (absl::Status st = ApplyCommandLine(*cl, config); !st.ok()) {
    std::cerr << "dllm-server: " << st.message() << "\n";
    return 2;
  }
  return std::nullopt;
}

// Routes gRPC's and protobuf's log lines into `logger` for as long as this object lives.
class LibraryLogRoute {
 public:
  explicit LibraryLogRoute(Logger* logger) {
    g_library_logger.store(logger);
    gpr_set_log_function(RouteGrpcLog);
    google::protobuf::SetLogHandler(RouteProtobufLog);
  }
  ~LibraryLogRoute() { g_library_logger.store(nullptr); }
  LibraryLogRoute(const LibraryLogRoute&) = delete;
  LibraryLogRoute& operator=(const LibraryLogRoute&) = delete;
};

// Every client connection is a descriptor, and the usual soft limit (1024) is far below
// http.max_connections: use what the hard limit allows, as nginx and Go servers do. Where even
// that cannot hold http.max_connections beside the descriptors the rest of the server needs
// (gRPC, metrics, model files, logs: kReservedFiles), HTTP takes fewer connections and says
// so, rather than let a flood of connections starve /metrics and gRPC of descriptors.
void FitConnectionsToOpenFileLimit(Logger& logger, HttpSection* http) {
  constexpr rlim_t kReservedFiles = 256;
  rlimit files = {};
  if (getrlimit(RLIMIT_NOFILE, &files) != 0) return;
  if (files.rlim_cur < files.rlim_max) {
    files.rlim_cur = files.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &files) != 0) {
      logger.Warning("open_file_limit", {{"detail", std::string("cannot raise RLIMIT_NOFILE")}});
      getrlimit(RLIMIT_NOFILE, &files);
    }
  }
  if (files.rlim_cur == RLIM_INFINITY) return;
  const rlim_t wanted = static_cast<rlim_t>(http->max_connections) + kReservedFiles;
  if (files.rlim_cur >= wanted) return;
  const int fitting = files.rlim_cur > 2 * kReservedFiles
                          ? static_cast<int>(files.rlim_cur - kReservedFiles)
                          : static_cast<int>(files.rlim_cur / 2);
  logger.Warning("open_file_limit",
                 {{"detail", std::string("http.max_connections lowered to fit the open-file "
                                         "limit (raise `ulimit -n` to allow more)")},
                  {"open_file_limit", static_cast<int64_t>(files.rlim_cur)},
                  {"configured", static_cast<int64_t>(http->max_connections)},
                  {"max_connections", static_cast<int64_t>(fitting)}});
  http->max_connections = fitting;
}

absl::StatusOr<std::unique_ptr<TokenAuthenticator>> CreateAuthenticator(const AuthSection& auth) {
  return TokenAuthenticator::Create(auth,
                                    [](const std::string& name) -> std::optional<std::string> {
                                      const char* value = std::getenv(name.c_str());
                                      if (value == nullptr) return std::nullopt;
                                      return std::string(value);
                                    });
}

// Members in the order of their construction, so that they are destroyed in reverse.
struct MetricsServing {
  std::unique_ptr<ServerMetrics> metrics;  // null when metrics.port is 0
  std::unique_ptr<MetricsEndpoint> endpoint;
  std::shared_ptr<ProcessMetrics> process = std::make_shared<ProcessMetrics>();
};

// Serves /metrics (unless metrics.port is 0).
absl::Status StartMetrics(const MetricsSection& config, MetricsServing* out) {
  if (config.port == 0) return absl::OkStatus();
  out->metrics = std::make_unique<ServerMetrics>();
  absl::StatusOr<std::unique_ptr<MetricsEndpoint>> endpoint =
      MetricsEndpoint::Start(config.address, config.port);
  if (!endpoint.ok()) return endpoint.status();
  out->endpoint = *std::move(endpoint);
  out->endpoint->Register(out->metrics->registry());
  out->endpoint->Register(out->process);
  return absl::OkStatus();
}

// Members in the order of their construction, so that they are destroyed in reverse. The
// builder stays alive with the server, as it did when it was a local of Run.
struct GrpcServing {
  grpc::ServerBuilder builder;
  std::unique_ptr<grpc::experimental::ExternalConnectionAcceptor> acceptor;
  std::unique_ptr<grpc::Server> server;
};

// Builds and starts the gRPC server; its connections come through `out->acceptor`, which the
// caller hands to the listener that owns the port.
absl::Status StartGrpcServer(const ServerSection& config,
                             const std::shared_ptr<grpc::ServerCredentials>& credentials,
                             DiffusionService* service, GrpcServing* out) {
  grpc::ServerBuilder& builder = out->builder;
  out->acceptor = builder.experimental().AddExternalConnectionAcceptor(
      grpc::ServerBuilder::experimental_type::ExternalConnectionType::FROM_FD, credentials);
  builder.RegisterService(service);
  builder.SetMaxReceiveMessageSize(static_cast<int>(config.max_receive_message_bytes));
  if (config.max_connection_age_seconds > 0) {
    // A GOAWAY when a connection reaches this age; its calls run on (no grace limit).
    builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_AGE_MS,
                               config.max_connection_age_seconds * 1000);
  }
  builder.SetMaxSendMessageSize(static_cast<int>(config.max_send_message_bytes));
  if (config.threads > 0) {
    grpc::ResourceQuota quota("dllm-server");
    quota.SetMaxThreads(config.threads);
    builder.SetResourceQuota(quota);
  }
  out->server = builder.BuildAndStart();
  if (out->server == nullptr) {
    return absl::UnavailableError(
        absl::StrCat("cannot serve gRPC on ", config.address, ": gRPC could not start the server"));
  }
  return absl::OkStatus();
}

// The OpenAI-compatible HTTP API (off unless http.port is set): same service, same engine.
absl::Status StartHttp(const ServerConfig& config, Gateway* gateway, Logger* logger,
                       std::unique_ptr<HttpServer>* http) {
  if (config.http.port == 0) return absl::OkStatus();
  absl::StatusOr<std::unique_ptr<HttpServer>> started = HttpServer::Start(config, gateway, logger);
  if (!started.ok()) return started.status();
  *http = *std::move(started);
  logger->Info("http_listening", {{"address", config.http.address},
                                  {"port", int64_t{(*http)->port()}},
                                  {"tls", config.tls.enabled()}});
  return absl::OkStatus();
}

void LogListening(Logger& logger, const ServerConfig& config, int port, bool auth_enabled) {
  logger.Info("listening", {{"address", config.server.address},
                            {"port", int64_t{port}},
                            {"tls", config.tls.enabled()},
                            {"mtls", !config.tls.client_ca.empty()},
                            {"auth", auth_enabled},
                            {"metrics_port", int64_t{config.metrics.port}}});
}

EngineOptions EngineOptionsFor(const ServerConfig& config, ServerMetrics* metrics) {
  EngineOptions options;
  options.model_dir = config.engine.model;
  options.backend = config.engine.backend;
  options.max_batch_sequences = config.engine.max_batch_sequences;
  options.kv_budget_bytes = config.engine.kv_budget_bytes;
  options.queue_capacity = config.engine.queue_capacity;
  options.refuse_late_requests = config.engine.refuse_late_requests;
  options.tau_switch_slack_ratio = config.engine.tau_switch_slack_ratio;
  options.cpu_threads = config.engine.cpu_threads;
  options.max_new_tokens_limit = config.limits.max_new_tokens;
  options.observer = metrics;
  options.shadow.sample_rate = config.cache.shadow_sample_rate;
  options.shadow.max_time_fraction = config.cache.shadow_max_time_fraction;
  options.shadow.tau_autotune = config.cache.autotune;
  return options;
}

// Loads the model; `metrics` (may be null) observes the engine and gets the build info.
absl::StatusOr<std::unique_ptr<Engine>> LoadEngine(const ServerConfig& config,
                                                   ServerMetrics* metrics, Logger& logger) {
  // The engine keeps its own copy of the options.
  const EngineOptions options = EngineOptionsFor(config, metrics);
  const absl::Time load_start = absl::Now();
  absl::StatusOr<std::unique_ptr<Engine>> engine = Engine::Create(options);
  if (!engine.ok()) return engine.status();
  const ModelInfo& info = (*engine)->model_info();
  if (metrics != nullptr) {
    metrics->SetBuildInfo(DLLM_VERSION, std::string(BackendName(config.engine.backend)),
                          config.engine.model);
  }
  logger.Info("model_loaded", {{"model", config.engine.model},
                               {"family", info.family},
                               {"backend", std::string(BackendName(config.engine.backend))},
                               {"layers", int64_t{info.num_layers}},
                               {"load_ms", absl::ToDoubleMilliseconds(absl::Now() - load_start)}});
  return engine;
}

absl::Status WarmUp(Engine& engine, Logger& logger) {
  const absl::Time warm_start = absl::Now();
  if (absl::Status st = RunWarmup(engine, kWarmupTimeout); !st.ok()) return st;
  logger.Info("warmup_done", {{"ms", absl::ToDoubleMilliseconds(absl::Now() - warm_start)}});
  return absl::OkStatus();
}

// What the shutdown acts on; all of it is owned by Run.
struct Serving {
  const ServerSection* config;
  Logger* logger;
  Gateway* gateway;
  grpc::HealthCheckServiceInterface* health;
  GrpcListener* grpc_listener;
  HttpServer* http;                 // null when http.port is 0
  std::unique_ptr<Engine>* engine;  // reset once drained
};

// Blocks until SIGTERM or SIGINT, then reports NOT_SERVING. Returns the signal's number.
int AwaitStopSignal(const Serving& s) {
  const int signal_number = WaitForStopSignal();
  // Lame duck (SIGTERM only; an interactive ^C stops at once): health checks report
  // NOT_SERVING while every call is still served, so that balancers and clients that check
  // health move away first. A second signal cuts it short.
  s.health->SetServingStatus(false);
  s.gateway->SetLameDuck();
  // HTTP replies close their connections from now on: a proxy that keeps connections to
  // this replica (nginx upstream keepalive) gives them up, one reply at a time, while every
  // request is still served.
  if (s.http != nullptr) s.http->SetLameDuck();
  if (signal_number == SIGTERM && s.config->lame_duck_seconds > 0) {
    s.logger->Info("lame_duck", {{"seconds", s.config->lame_duck_seconds}});
    WaitForStopSignalFor(absl::Seconds(s.config->lame_duck_seconds));
  }
  return signal_number;
}

// gRPC clients that keep connections (a proxy's upstream keepalive, a channel) send calls on
// them until they get a GOAWAY; refused, such a call is lost (nginx never retries a call it
// has sent). gRPC sends each connection its GOAWAY at server.max_connection_age_seconds (up
// to 10% later), so calls keep being served until every connection open now has been sent
// one (and its client had a second to see it), or has closed, within the stop deadline.
void AwaitGrpcGoaways(const Serving& s, absl::Time stop_deadline) {
  if (s.config->max_connection_age_seconds <= 0) return;
  const absl::Duration goaway_sent =
      absl::Seconds(s.config->max_connection_age_seconds) * 1.1 + absl::Seconds(1);
  // Leave the engine's drain at least a second of the deadline.
  const absl::Time limit = stop_deadline - absl::Seconds(2);
  const absl::Time start = absl::Now();
  const size_t open = s.grpc_listener->open_connections();
  if (open > 0) {
    s.logger->Info(
        "draining_connections",
        {{"grpc_connections", static_cast<int64_t>(open)},
         {"max_wait_seconds",
          absl::ToDoubleSeconds(
              std::min(s.grpc_listener->OpenConnectionsAgedBy(goaway_sent), limit) - start)}});
  }
  while (absl::Now() < limit && s.grpc_listener->OpenConnectionsAgedBy(goaway_sent) > absl::Now()) {
    absl::SleepFor(absl::Milliseconds(50));
  }
}

[[noreturn]] void DrainAndExit(int signal_number, const Serving& s) {
  // The drain timeout bounds the rest of the shutdown, whatever clients do (plus a second
  // to write the last replies).
  const absl::Time stop_deadline =
      absl::Now() + absl::Seconds(s.config->drain_timeout_seconds) + absl::Seconds(1);
  s.logger->Info("draining", {{"signal", int64_t{signal_number}},
                              {"drain_timeout_seconds", s.config->drain_timeout_seconds}});
  // Stop accepting connections: a balancer that still sends here now gets "connection
  // refused", which it retries on another replica (a call refused with UNAVAILABLE on an
  // open connection it may not retry). Open connections are still answered.
  s.grpc_listener->StopAccepting();
  if (s.http != nullptr) s.http->StopAccepting();
  // A connection accepted just before the listener closed (a balancer that opens one per
  // call) sends its call a moment later: admit it rather than refuse it.
  absl::SleepFor(kAcceptedConnectionGrace);
  AwaitGrpcGoaways(s, stop_deadline);
  s.gateway->SetDraining();
  (*s.engine)->Drain(absl::Seconds(s.config->drain_timeout_seconds));
  // Every accepted request has its final event now; wait until gRPC has handed their replies
  // to the transport, and give the kernel a moment to send them.
  s.gateway->WaitForOpenCalls(
      std::max(absl::ZeroDuration(),
               std::min(absl::FromChrono(kShutdownGrace), stop_deadline - absl::Now())));
  absl::SleepFor(kFinalFlush);
  // Half-close every gRPC connection and wait (briefly) for its client to close its side:
  // exiting with a client's bytes unread would reset the connection, and a reset discards
  // what the kernel has not yet sent of the last replies.
  s.grpc_listener->CloseConnections(std::min(absl::Now() + kGrpcCloseWait, stop_deadline));
  // HTTP: close the listener and wait for its connection threads, i.e. until every HTTP
  // response (all of which have their final events now) is written; idle keep-alive
  // connections delay this by at most the keep-alive timeout, and a client trickling bytes
  // no longer than the stop deadline.
  if (s.http != nullptr &&
      !s.http->Stop(std::max(absl::ZeroDuration(), stop_deadline - absl::Now()))) {
    s.logger->Warning("http_stop_timeout",
                      {{"detail", std::string("HTTP connections still open at the drain deadline "
                                              "were closed by exiting")}});
  }
  s.engine->reset();
  s.logger->Info("stopped");
  std::cerr.flush();
  // Deliberately no grpc::Server::Shutdown (and no destructors, which would call it): calls
  // that reach gRPC while it shuts down are dropped as zombies and their clients see
  // CANCELLED, unlogged and uncounted (6 of 64 under a probe). Exiting closes the
  // connections instead, so a call still in flight sees UNAVAILABLE, the status that tells a
  // client to retry elsewhere. Calls that arrive meanwhile get UNAVAILABLE from the service
  // (SetDraining) and are logged and counted as such.
  std::_Exit(0);
}

// What serves calls before a model is attached: the gateway, gRPC (health NOT_SERVING) and
// HTTP. Members are destroyed in reverse order, the transports (whose calls point at the
// gateway) first.
struct FrontEnds {
  std::unique_ptr<Gateway> gateway;
  std::unique_ptr<DiffusionService> service;
  std::unique_ptr<GrpcListener> grpc_listener;
  GrpcServing grpc;
  std::unique_ptr<HttpServer> http;
  grpc::HealthCheckServiceInterface* health = nullptr;
};

// A start-up stage that failed, named as the "startup_failed" log line names it.
struct StartupFailure {
  std::string_view stage;
  absl::Status status;
};

// Binds the gRPC port, starts gRPC and HTTP, and reports NOT_SERVING on health. On failure a
// gRPC server already started is stopped.
std::optional<StartupFailure> StartFrontEnds(
    const ServerConfig& config, const TokenAuthenticator* auth,
    const std::shared_ptr<grpc::ServerCredentials>& credentials, MetricsServing& metrics,
    Logger& logger, FrontEnds& out) {
  out.gateway = std::make_unique<Gateway>(config, auth, metrics.metrics.get(), &logger);
  out.service = std::make_unique<DiffusionService>(out.gateway.get());
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  // The gRPC port's socket is ours (server/grpc/grpc_listener.h): a drain can close it.
  absl::StatusOr<std::unique_ptr<GrpcListener>> listener =
      GrpcListener::Bind(config.server.address);
  if (!listener.ok()) return StartupFailure{"listen", listener.status()};
  out.grpc_listener = *std::move(listener);
  if (absl::Status st = StartGrpcServer(config.server, credentials, out.service.get(), &out.grpc);
      !st.ok()) {
    return StartupFailure{"listen", st};
  }
  // The default health service reports "" SERVING from its construction until a status is
  // set, so NOT_SERVING is set before the listener hands gRPC its first connection: a probe
  // (a readiness check, a test's wait) must never see SERVING while the model loads. From here
  // on SetServingStatus(bool) updates both names.
  out.health = out.grpc.server->GetHealthCheckService();
  out.health->SetServingStatus(v1::DiffusionLM::service_full_name(), false);
  out.health->SetServingStatus(false);
  out.grpc_listener->Start(std::move(out.grpc.acceptor));
  if (absl::Status st = StartHttp(config, out.gateway.get(), &logger, &out.http); !st.ok()) {
    out.grpc.server->Shutdown(std::chrono::system_clock::now());
    return StartupFailure{"http", st};
  }
  if (out.http != nullptr && metrics.endpoint != nullptr) {
    metrics.endpoint->Register(out.http->connection_metrics());
  }
  return std::nullopt;
}

// Start-up: config, logging, signals, auth and TLS, metrics, the front ends (health
// NOT_SERVING), the model, warm-up, SERVING; then wait for a stop signal and drain.
int Run(int argc, char** argv) {
  ServerConfig config;
  if (std::optional<int> exit_code = LoadConfig(argc, argv, &config)) return *exit_code;

  Logger logger(config.logging.level, config.logging.format, &std::cerr);
  LibraryLogRoute library_log_route(&logger);
  auto fail = [&logger](std::string_view what, const absl::Status& status) {
    logger.Error("startup_failed",
                 {{"stage", std::string(what)}, {"error", std::string(status.message())}});
    return 1;
  };
  if (absl::Status st = InstallStopSignalHandlers(); !st.ok()) return fail("signals", st);
  FitConnectionsToOpenFileLimit(logger, &config.http);

  absl::StatusOr<std::unique_ptr<TokenAuthenticator>> auth = CreateAuthenticator(config.auth);
  if (!auth.ok()) return fail("auth", auth.status());
  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> credentials =
      MakeServerCredentials(config.tls);
  if (!credentials.ok()) return fail("tls", credentials.status());
  // Metrics outlive the engine (the engine holds the observer pointer).
  MetricsServing metrics;
  if (absl::Status st = StartMetrics(config.metrics, &metrics); !st.ok()) {
    return fail("metrics", st);
  }
  FrontEnds front;
  if (std::optional<StartupFailure> failed =
          StartFrontEnds(config, auth->get(), *credentials, metrics, logger, front)) {
    return fail(failed->stage, failed->status);
  }
  LogListening(logger, config, front.grpc_listener->port(), (*auth)->enabled());

  // From here on a failed start-up stops the gRPC server before it logs why.
  auto stop_and_fail = [&](std::string_view what, const absl::Status& status) {
    front.grpc.server->Shutdown(std::chrono::system_clock::now());
    return fail(what, status);
  };
  absl::StatusOr<std::unique_ptr<Engine>> engine =
      LoadEngine(config, metrics.metrics.get(), logger);
  if (!engine.ok()) return stop_and_fail("load_model", engine.status());
  if (config.server.warmup) {
    if (absl::Status st = WarmUp(**engine, logger); !st.ok()) return stop_and_fail("warmup", st);
  }
  if (absl::Status st = front.gateway->AttachEngine(engine->get()); !st.ok()) {
    return stop_and_fail("config", st);
  }
  if (!StopSignalPending()) {  // a pod stopped during loading never turns ready
    front.health->SetServingStatus(true);
    logger.Info("serving", {{"port", int64_t{front.grpc_listener->port()}}});
  }

  const Serving serving = {.config = &config.server,
                           .logger = &logger,
                           .gateway = front.gateway.get(),
                           .health = front.health,
                           .grpc_listener = front.grpc_listener.get(),
                           .http = front.http.get(),
                           .engine = &*engine};
  DrainAndExit(AwaitStopSignal(serving), serving);
}

}  // namespace
}  // namespace dllm

// Exits without static destructors: every request is finished and logged by then, and the
// library teardown that would follow (gRPC's and OpenBLAS's threads) kept the process alive
// 0.3-2 s after "stopped", which supervisors count as shutdown time.
int main(int argc, char** argv) {
  // glibc serves a large allocation with its own mapping, returned when freed, until the first
  // such free; from then on it raises that threshold to the freed size (up to 32 MiB) and
  // keeps memory of that size in its heaps. A burst of 4 MiB request bodies thus stayed
  // resident after it ended (500 bodies: 2 GB, even after malloc_trim). A fixed threshold
  // (glibc's initial 128 KiB) keeps giving such memory back. Measured: the engine's CPU time
  // per token did not change (llada-cot, 6 val items, vanilla/entropy/d2cache, within 2%).
  mallopt(M_MMAP_THRESHOLD, 128 << 10);
  const int rc = dllm::Run(argc, argv);
  std::cout.flush();
  std::cerr.flush();
  std::_Exit(rc);
}
