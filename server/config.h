// ServerConfig: the typed form of the server's YAML configuration (config/default.yaml).
//
// The file is parsed once at start-up into these structs and validated as a whole; every
// error names the offending key (dotted path) and the reason. Unknown keys are errors, so
// a typo never silently falls back to a default. Absent keys keep the defaults written
// below. Decoding and cache defaults are optional: an absent key means "the model family's
// default" (ModelInfo::default_decoding / default_cache).
//
// Thread-safety: plain values; immutable after start-up.
#ifndef DLLM_SERVER_CONFIG_H_
#define DLLM_SERVER_CONFIG_H_

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/core/param_fields.h"
#include "engine/engine.h"

namespace dllm {

// The largest message gRPC carries (its sizes are int32): the bound on the message size
// settings, and so on anything a message holds, such as a prompt.
inline constexpr int64_t kMaxGrpcMessageBytes = std::numeric_limits<int32_t>::max();

struct ServerSection {
  std::string address = "0.0.0.0:50051";  // gRPC listen address, host:port
  int threads = 0;  // upper bound for gRPC's thread pool (ResourceQuota); 0 = gRPC default
  int64_t max_receive_message_bytes = int64_t{4} << 20;
  int64_t max_send_message_bytes = int64_t{16} << 20;
  double drain_timeout_seconds = 30;  // SIGTERM: time in-flight requests get to finish
  // SIGTERM: first this long reporting NOT_SERVING (health, /health) while still serving
  // every call, so that balancers move away; then stop accepting and drain. SIGINT skips it.
  double lame_duck_seconds = 0;
  // gRPC sends each connection a GOAWAY once it is this old (up to 10% later: gRPC's jitter),
  // and its client opens a new one. A drain serves calls on a connection until it has been
  // sent its GOAWAY (or closed), so that a proxy that reuses connections (nginx upstream
  // keepalive) moves away without a refused call. 0 = never (a drain then refuses calls that
  // arrive on open connections).
  int max_connection_age_seconds = 20;
  bool warmup = true;  // run one tiny generation before reporting SERVING
};

struct TlsSection {
  std::string cert;       // PEM server certificate chain; empty with key = plaintext
  std::string key;        // PEM private key
  std::string client_ca;  // PEM CA bundle; non-empty = mutual TLS (client certs required)
  bool enabled() const { return !cert.empty(); }
};

struct AuthSection {
  std::string tokens_file;  // one bearer token per line; '#' starts a comment
  std::string tokens_env;   // name of an env var holding tokens separated by ',' or spaces
  bool enabled() const { return !tokens_file.empty() || !tokens_env.empty(); }
};

struct EngineSection {
  BackendKind backend = BackendKind::kCpu;
  std::string model = "models/llada-tiny";
  int max_batch_sequences = 8;
  int64_t kv_budget_bytes = int64_t{1} << 30;
  int queue_capacity = 64;
  // Cost-aware admission (engine/scheduler/worker.h): refuse at arrival, RESOURCE_EXHAUSTED
  // with Retry-After, a request whose deadline the backlog forecast rules out.
  bool refuse_late_requests = true;
  // SLO-aware tau (engine/scheduler/worker.h): EngineOptions::tau_switch_slack_ratio.
  double tau_switch_slack_ratio = 3;
  int cpu_threads = 0;
};

// Server-wide defaults for unset request fields: the `decoding:` and `cache:` keys named in
// engine/core/param_fields.h's table, each section's in its `fields`. An absent key (or an
// explicit null) means the model family's default.
struct DecodingDefaults {
  std::optional<int> max_new_tokens;  // nullopt = the model's default (ModelInfo)
  ParamOverrides fields;              // decoding.* fields
};

struct CacheDefaults {
  ParamOverrides fields;  // cache.* fields, but for shadow_sample_rate (below)
  // Not a request default: the engine's ShadowOptions::sample_rate, the fraction of
  // partial steps checked by a shadow full forward (cache-quality metrics). 0 = off.
  float shadow_sample_rate = 0.0f;
  // Not a request default: ShadowOptions::max_time_fraction, the cap on shadow time as
  // a fraction of the engine's step time (> 0; a large value lifts it). The default keeps
  // shadow sampling's cost at or under 2% whatever the rate and the cache's speed-up.
  double shadow_max_time_fraction = 0.02;
  // Not a request default either: ShadowOptions::tau_autotune (cache.autotune.*), which scales
  // every EntropyCache tau to keep the shadow token-mismatch rate under a budget. Off by
  // default; needs shadow_sample_rate > 0.
  TauAutotuneOptions autotune;
};

// Operator bounds on per-request knobs (checked after defaults are applied).
struct LimitsSection {
  int max_new_tokens = 512;
  int max_prompt_tokens = 2048;
  // Prompt (or chat messages') text bytes, checked before tokenizing; 0 = derived from the
  // token limit and the model's max positions (EffectiveMaxPromptBytes, 32 bytes per token).
  int64_t max_prompt_bytes = 0;
  int max_steps = 1024;
  int max_block_length = 512;
  int max_window = 512;
  float max_temperature = 2.0f;
  // Upper bound on a request's own cache.shadow_sample_rate: each shadow costs about one full
  // forward, so clients must not be able to double the server's work by asking for 1.
  float max_shadow_sample_rate = 0.1f;
  // Choices one request may ask for (`n`, gRPC and HTTP); each is an engine request of its
  // own, so n choices cost n requests' compute and queue places.
  int max_choices = 8;
  std::vector<CachePolicyKind> allowed_cache_policies = {kAllCachePolicies.begin(),
                                                         kAllCachePolicies.end()};
};

struct MetricsSection {
  std::string address = "0.0.0.0";
  int port = 9400;  // /metrics port (server/http/metrics_endpoint.h); 0 disables metrics
};

// OpenAI-compatible HTTP API (server/http/http_server.h). Off unless a port is set; it shares the
// gRPC side's engine queue, limits, auth, TLS (tls: section) and drain.
struct HttpSection {
  std::string address = "0.0.0.0";   // listen host
  int port = 0;                      // 0 = no HTTP listener
  int threads = 4;                   // event-loop threads; connections are not tied to threads
  int max_connections = 4096;        // open connections; when full, a new one replaces the
                                     // oldest that never sent a request, else it is closed
  int max_connections_per_peer = 0;  // open connections from one client address; 0 = no cap
  int head_timeout_seconds = 10;     // a request's header, from its first byte (at most
                                     // read_timeout_seconds)
  int read_timeout_seconds = 30;     // a request's header and body, from its first byte; and the
                                     // time one reply write may take (a client that stops reading)
  // Request bodies being received, all connections together; beyond it a request gets 503
  // with Retry-After. At least server.max_receive_message_bytes.
  int64_t max_buffered_body_bytes = int64_t{256} << 20;
  std::string model_name;  // id in /v1/models and responses; empty = engine.model's folder name
};

enum class LogLevel { kDebug, kInfo, kWarning, kError };
enum class LogFormat { kText, kJson };

struct LoggingSection {
  LogLevel level = LogLevel::kInfo;
  LogFormat format = LogFormat::kText;
};

struct ServerConfig {
  ServerSection server;
  TlsSection tls;
  AuthSection auth;
  EngineSection engine;
  DecodingDefaults decoding;
  CacheDefaults cache;
  LimitsSection limits;
  MetricsSection metrics;
  LoggingSection logging;
  HttpSection http;
};

// Defaults applied to unset request fields: the config's when set, else the model family's.
struct RequestDefaults {
  int max_new_tokens = 64;
  DecodingParams decoding;
  CacheParams cache;
};

RequestDefaults ResolveRequestDefaults(const ModelInfo& model, const DecodingDefaults& decoding,
                                       const CacheDefaults& cache);

// The limits: section as the bounds of engine/core/params.h's ValidateParams, whose messages
// then name them ("decoding.steps: 5000 exceeds limits.max_steps (1024)"). `vocab_size` > 0
// bounds decoding.top_k.
ParamLimits ToParamLimits(const LimitsSection& limits, int vocab_size);

// Parses YAML text. `source` names the file in error messages. Returns INVALID_ARGUMENT
// with "<source>: <key>: <reason>" for syntax errors, wrong types, unknown keys and values
// that fail validation.
absl::StatusOr<ServerConfig> ParseServerConfig(std::string_view yaml_text, std::string_view source);

// Reads and parses a file (NOT_FOUND when it cannot be read).
absl::StatusOr<ServerConfig> LoadServerConfig(const std::string& path);

// Checks cross-field constraints (ranges, TLS key with cert, ...). Called by the parsers
// and again after command-line overrides.
absl::Status ValidateServerConfig(const ServerConfig& config);

// Backend spellings of the YAML and the logs ("cpu", "cuda"); nullopt for an unknown name.
// The request enums' spellings are engine/core/params.h's Name() and Parse*().
std::string_view BackendName(BackendKind backend);
std::optional<BackendKind> ParseBackend(std::string_view name);

}  // namespace dllm

#endif  // DLLM_SERVER_CONFIG_H_
