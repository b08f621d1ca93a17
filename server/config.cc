#include "server/config.h"

#include <yaml-cpp/yaml.h>

#include <array>
#include <cmath>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>
#include <type_traits>
#include <utility>
#include <variant>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/core/enum_names.h"
#include "engine/core/file_text.h"
#include "engine/core/params.h"
#include "engine/core/status_macros.h"
#include "server/limit_fields.h"

namespace dllm {
namespace {

// The request enums' spellings are the engine's one table (engine/core/params.h).
template <typename E, size_t N>
std::array<EnumName<E>, N> CoreTable(const std::array<E, N>& values) {
  std::array<EnumName<E>, N> out{};
  for (size_t i = 0; i < N; ++i) out[i] = {values[i], Name(values[i])};
  return out;
}
const auto kCachePolicies = CoreTable(kAllCachePolicies);
constexpr std::array<EnumName<BackendKind>, 2> kBackends = {{
    {BackendKind::kCpu, "cpu"},
    {BackendKind::kCuda, "cuda"},
}};
constexpr std::array<EnumName<LogLevel>, 4> kLogLevels = {{
    {LogLevel::kDebug, "debug"},
    {LogLevel::kInfo, "info"},
    {LogLevel::kWarning, "warning"},
    {LogLevel::kError, "error"},
}};
constexpr std::array<EnumName<LogFormat>, 2> kLogFormats = {{
    {LogFormat::kText, "text"},
    {LogFormat::kJson, "json"},
}};

// Reads one YAML mapping, remembering which keys were consumed so that leftovers can be
// reported as unknown. The first error wins; later reads become no-ops.
class MapReader {
 public:
  MapReader(const YAML::Node& node, std::string path, std::string* error)
      : node_(node), path_(std::move(path)), error_(error) {
    if (!error_->empty()) return;
    if (node_ && !node_.IsNull() && !node_.IsMap()) {
      Fail(path_.empty() ? "(top level)" : path_, "expected a mapping");
    }
  }

  std::string Key(absl::string_view key) const {
    return path_.empty() ? std::string(key) : absl::StrCat(path_, ".", key);
  }

  // Returns the child node, or an undefined node when absent.
  YAML::Node Child(absl::string_view key) {
    known_.insert(std::string(key));
    if (!error_->empty() || !node_ || !node_.IsMap()) return YAML::Node(YAML::NodeType::Undefined);
    // Look up through a const node: yaml-cpp's non-const operator[] may insert the key.
    const YAML::Node& map = node_;
    return map[std::string(key)];
  }

  template <typename T>
  void Read(absl::string_view key, T* out) {
    YAML::Node child = Child(key);
    if (!error_->empty() || !child.IsDefined()) return;
    if (child.IsNull()) {
      Fail(Key(key), "has no value");
      return;
    }
    Convert(child, Key(key), out);
  }

  template <typename T>
  void ReadOptional(absl::string_view key, std::optional<T>* out) {
    YAML::Node child = Child(key);
    if (!error_->empty() || !child.IsDefined() || child.IsNull()) return;  // null = unset
    T value{};
    if (Convert(child, Key(key), &value)) *out = value;
  }

  template <typename E, size_t N>
  void ReadEnum(absl::string_view key, const std::array<EnumName<E>, N>& table, E* out) {
    std::optional<E> value;
    ReadOptionalEnum(key, table, &value);
    if (value) *out = *value;
  }

  template <typename E, size_t N>
  void ReadOptionalEnum(absl::string_view key, const std::array<EnumName<E>, N>& table,
                        std::optional<E>* out) {
    std::string name;
    YAML::Node child = Child(key);
    if (!error_->empty() || !child.IsDefined() || child.IsNull()) return;
    if (!Convert(child, Key(key), &name)) return;
    std::optional<E> value = ValueOf(table, name);
    if (!value) {
      Fail(Key(key),
           absl::StrCat("unknown value '", name, "' (expected ", JoinedNames(table), ")"));
      return;
    }
    *out = value;
  }

  template <typename E, size_t N>
  void ReadEnumList(absl::string_view key, const std::array<EnumName<E>, N>& table,
                    std::vector<E>* out) {
    YAML::Node child = Child(key);
    if (!error_->empty() || !child.IsDefined()) return;
    if (!child.IsSequence()) {
      Fail(Key(key), absl::StrCat("expected a list of ", JoinedNames(table)));
      return;
    }
    std::vector<E> values;
    for (size_t i = 0; i < child.size(); ++i) {
      std::string name;
      const std::string item_key = absl::StrCat(Key(key), "[", i, "]");
      if (!Convert(child[i], item_key, &name)) return;
      std::optional<E> value = ValueOf(table, name);
      if (!value) {
        Fail(item_key,
             absl::StrCat("unknown value '", name, "' (expected ", JoinedNames(table), ")"));
        return;
      }
      values.push_back(*value);
    }
    *out = std::move(values);
  }

  // Reads every field of the request fields' table in `section` (engine/core/param_fields.h)
  // that is present and not null, except keys an earlier Read of this mapping consumed.
  void ReadParams(ParamSection section, ParamOverrides* out) {
    for (const ParamField& f : ParamFields()) {
      if (f.section != section || known_.count(std::string(f.name))) continue;
      switch (f.type) {
        case ParamType::kInt32:
          ReadParam<int>(f, out);
          break;
        case ParamType::kUint64:
          ReadParam<uint64_t>(f, out);
          break;
        case ParamType::kFloat:
          ReadParam<float>(f, out);
          break;
        case ParamType::kEnum: {
          std::optional<std::string> name;
          ReadOptional(f.name, &name);
          if (!name) break;
          absl::StatusOr<ParamValue> value = ParseParamText(f, *name);
          if (!value.ok()) {
            Fail(Key(f.name),
                 absl::StrCat("unknown value '", *name, "' (expected ", DomainText(f), ")"));
            break;
          }
          out->Set(f, *value);
          break;
        }
      }
    }
  }

  // Reports keys that no Read call asked for.
  void CheckUnknownKeys() {
    if (!error_->empty() || !node_ || !node_.IsMap()) return;
    for (const auto& entry : node_) {
      const std::string key = entry.first.Scalar();
      if (!known_.count(key)) {
        std::vector<std::string> known(known_.begin(), known_.end());
        Fail(Key(key), absl::StrCat("unknown key (known keys: ", absl::StrJoin(known, ", "), ")"));
        return;
      }
    }
  }

  void Fail(const std::string& key, absl::string_view reason) {
    if (error_->empty()) *error_ = absl::StrCat(key, ": ", reason);
  }

 private:
  template <typename T>
  void ReadParam(const ParamField& f, ParamOverrides* out) {
    std::optional<T> value;
    ReadOptional(f.name, &value);
    if (value) out->Set(f, ToParamValue(*value));
  }

  bool Scalar(const YAML::Node& node, const std::string& key, std::string* text) {
    if (!node.IsScalar()) {
      Fail(key, "expected a scalar value");
      return false;
    }
    *text = node.Scalar();
    return true;
  }

  bool Convert(const YAML::Node& node, const std::string& key, std::string* out) {
    return Scalar(node, key, out);
  }

  bool Convert(const YAML::Node& node, const std::string& key, bool* out) {
    std::string text;
    if (!Scalar(node, key, &text)) return false;
    if (text == "true") {
      *out = true;
    } else if (text == "false") {
      *out = false;
    } else {
      Fail(key, absl::StrCat("expected true or false, got '", text, "'"));
      return false;
    }
    return true;
  }

  bool ConvertInteger(const YAML::Node& node, const std::string& key, long double lo,
                      long double hi, long long* out) {
    std::string text;
    if (!Scalar(node, key, &text)) return false;
    size_t used = 0;
    long long value = 0;
    try {
      value = std::stoll(text, &used, 10);
    } catch (...) {
      used = 0;
    }
    if (used == 0 || used != text.size()) {
      Fail(key, absl::StrCat("expected an integer, got '", text, "'"));
      return false;
    }
    if (value < lo || value > hi) {
      Fail(key, absl::StrCat("integer ", text, " out of range"));
      return false;
    }
    *out = value;
    return true;
  }

  bool Convert(const YAML::Node& node, const std::string& key, int* out) {
    long long value = 0;
    if (!ConvertInteger(node, key, std::numeric_limits<int>::min(), std::numeric_limits<int>::max(),
                        &value)) {
      return false;
    }
    *out = static_cast<int>(value);
    return true;
  }

  bool Convert(const YAML::Node& node, const std::string& key, int64_t* out) {
    long long value = 0;
    if (!ConvertInteger(node, key, std::numeric_limits<int64_t>::min(),
                        std::numeric_limits<int64_t>::max(), &value)) {
      return false;
    }
    *out = value;
    return true;
  }

  bool Convert(const YAML::Node& node, const std::string& key, uint64_t* out) {
    std::string text;
    if (!Scalar(node, key, &text)) return false;
    size_t used = 0;
    unsigned long long value = 0;
    try {
      value = std::stoull(text, &used, 10);
    } catch (...) {
      used = 0;
    }
    if (used == 0 || used != text.size() || text[0] == '-') {
      Fail(key, absl::StrCat("expected a non-negative integer, got '", text, "'"));
      return false;
    }
    *out = value;
    return true;
  }

  bool Convert(const YAML::Node& node, const std::string& key, double* out) {
    std::string text;
    if (!Scalar(node, key, &text)) return false;
    size_t used = 0;
    double value = 0;
    try {
      value = std::stod(text, &used);
    } catch (...) {
      used = 0;
    }
    if (used == 0 || used != text.size() || !std::isfinite(value)) {
      Fail(key, absl::StrCat("expected a number, got '", text, "'"));
      return false;
    }
    *out = value;
    return true;
  }

  bool Convert(const YAML::Node& node, const std::string& key, float* out) {
    double value = 0;
    if (!Convert(node, key, &value)) return false;
    *out = static_cast<float>(value);
    return true;
  }

  YAML::Node node_;
  std::string path_;
  std::string* error_;
  std::set<std::string> known_;
};

absl::Status Invalid(absl::string_view key, absl::string_view reason) {
  return absl::InvalidArgumentError(absl::StrCat(key, ": ", reason));
}

// Integral values print as integers (1048576, not StrCat's 6-digit "1.04858e+06").
std::string FormatNumber(double value) {
  if (std::isfinite(value) && value == std::trunc(value) && std::fabs(value) < 9.0e15) {
    return absl::StrCat(static_cast<int64_t>(value));
  }
  return absl::StrCat(value);
}

absl::Status CheckRange(absl::string_view key, double value, double lo, double hi) {
  if (!(value >= lo && value <= hi)) {
    return Invalid(key, absl::StrCat(FormatNumber(value), " is outside [", FormatNumber(lo), ", ",
                                     FormatNumber(hi), "]"));
  }
  return absl::OkStatus();
}

// host:port (host may be a bracketed IPv6 literal) with port 0..65535 (0 = any free port);
// gRPC's unix:/unix-abstract: addresses have no port. gRPC itself would take "99999" modulo
// 65536 and listen somewhere unexpected.
absl::Status CheckListenAddress(absl::string_view key, const std::string& address) {
  if (absl::StartsWith(address, "unix:") || absl::StartsWith(address, "unix-abstract:")) {
    return absl::OkStatus();
  }
  const size_t colon = address.rfind(':');
  if (address.empty() || colon == std::string::npos || colon == 0) {
    return Invalid(key, absl::StrCat("'", address, "' is not host:port"));
  }
  const std::string port = address.substr(colon + 1);
  int value = -1;
  if (port.empty() || port.size() > 5 ||
      port.find_first_not_of("0123456789") != std::string::npos ||
      !absl::SimpleAtoi(port, &value) || value > 65535) {
    return Invalid(
        key, absl::StrCat("'", address, "': port '", port, "' is not a port number (0..65535)"));
  }
  return absl::OkStatus();
}

}  // namespace

std::string_view BackendName(BackendKind backend) { return NameOf(kBackends, backend); }
std::optional<BackendKind> ParseBackend(std::string_view name) { return ValueOf(kBackends, name); }

RequestDefaults ResolveRequestDefaults(const ModelInfo& model, const DecodingDefaults& d,
                                       const CacheDefaults& c) {
  RequestDefaults out;
  out.decoding = model.default_decoding;
  out.cache = model.default_cache;
  out.max_new_tokens = d.max_new_tokens.value_or(model.default_max_new_tokens);
  d.fields.ApplyTo(&out.decoding, &out.cache);
  c.fields.ApplyTo(&out.decoding, &out.cache);
  return out;
}

ParamLimits ToParamLimits(const LimitsSection& limits, int vocab_size) {
  ParamLimits out;
  for (const LimitField& f : LimitFields()) {
    const double value = LimitValue(limits, f);
    std::visit(
        [&](auto param) {
          if constexpr (!std::is_same_v<decltype(param), std::monostate>) {
            // Each row's range fits its ParamLimits member's type.
            out.*param = static_cast<std::remove_reference_t<decltype(out.*param)>>(value);
          }
        },
        f.param);
  }
  out.vocab_size = vocab_size;
  out.allowed_cache_policies = limits.allowed_cache_policies;
  out.section = "limits";
  return out;
}

namespace {

absl::Status ValidateServerSection(const ServerSection& s) {
  if (auto st = CheckListenAddress("server.address", s.address); !st.ok()) return st;
  if (auto st = CheckRange("server.threads", s.threads, 0, 4096); !st.ok()) return st;
  if (auto st = CheckRange("server.max_receive_message_bytes", s.max_receive_message_bytes, 1024,
                           static_cast<double>(kMaxGrpcMessageBytes));
      !st.ok()) {
    return st;
  }
  if (auto st = CheckRange("server.max_send_message_bytes", s.max_send_message_bytes, 1024,
                           static_cast<double>(kMaxGrpcMessageBytes));
      !st.ok()) {
    return st;
  }
  if (auto st =
          CheckRange("server.max_connection_age_seconds", s.max_connection_age_seconds, 0, 86400);
      !st.ok()) {
    return st;
  }
  if (auto st = CheckRange("server.lame_duck_seconds", s.lame_duck_seconds, 0, 600); !st.ok()) {
    return st;
  }
  if (auto st = CheckRange("server.drain_timeout_seconds", s.drain_timeout_seconds, 0, 3600);
      !st.ok()) {
    return st;
  }
  return absl::OkStatus();
}

absl::Status ValidateTlsSection(const TlsSection& tls) {
  if (tls.cert.empty() != tls.key.empty()) {
    return Invalid(tls.cert.empty() ? "tls.cert" : "tls.key",
                   "tls.cert and tls.key must be given together");
  }
  if (!tls.client_ca.empty() && tls.cert.empty()) {
    return Invalid("tls.client_ca", "mutual TLS needs tls.cert and tls.key");
  }
  return absl::OkStatus();
}

absl::Status ValidateEngineSection(const EngineSection& e) {
  if (e.model.empty()) return Invalid("engine.model", "must not be empty");
  if (auto st = CheckRange("engine.max_batch_sequences", e.max_batch_sequences, 1, 4096);
      !st.ok()) {
    return st;
  }
  if (e.kv_budget_bytes < 1) return Invalid("engine.kv_budget_bytes", "must be positive");
  if (auto st = CheckRange("engine.queue_capacity", e.queue_capacity, 1, 1 << 20); !st.ok()) {
    return st;
  }
  if (auto st = CheckRange("engine.cpu_threads", e.cpu_threads, 0, 1024); !st.ok()) return st;
  if (auto st = CheckRange("engine.tau_switch_slack_ratio", e.tau_switch_slack_ratio, 0, 1000);
      !st.ok()) {
    return st;
  }
  return absl::OkStatus();
}

absl::Status ValidateLimitsSection(const LimitsSection& l) {
  for (const LimitField& f : LimitFields()) {
    DLLM_RETURN_IF_ERROR(
        CheckRange(absl::StrCat("limits.", f.name), LimitValue(l, f), f.min, f.max));
  }
  if (l.allowed_cache_policies.empty()) {
    return Invalid("limits.allowed_cache_policies", "must name at least one policy");
  }
  return absl::OkStatus();
}

// The decoding: and cache: sections, checked against the limits (which passed already, so
// allowed_cache_policies is not empty).
absl::Status ValidateRequestDefaults(const ServerConfig& c) {
  const auto& l = c.limits;
  // Defaults must themselves respect the limits, otherwise every request would fail. Only each
  // field's own domain can be checked here: the rules between fields depend on the model's
  // defaults for the unset ones, and DiffusionService::AttachEngine checks the whole default
  // request once the model is loaded.
  const ParamLimits param_limits = ToParamLimits(l, /*vocab_size=*/0);
  if (c.decoding.max_new_tokens) {
    if (auto st = ValidateMaxNewTokens(*c.decoding.max_new_tokens, param_limits); !st.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("decoding.", st.message()));
    }
  }
  // Unset fields stand at values inside every valid limit (the model's own defaults are only
  // known once it loads), so that only the fields this config sets are checked here.
  ModelInfo least;
  least.default_decoding.block_length = 1;
  least.default_decoding.window = 1;
  least.default_cache.policy = l.allowed_cache_policies.front();
  least.default_cache.refresh_interval = 1;
  RequestDefaults defaults = ResolveRequestDefaults(least, c.decoding, c.cache);
  // The engine-wide shadow rate has the domain of a request's own.
  const auto& k = c.cache;
  defaults.cache.shadow_sample_rate = k.shadow_sample_rate;
  if (auto st = ValidateParamFields(defaults.decoding, defaults.cache, param_limits); !st.ok()) {
    return st;
  }
  if (!(k.shadow_max_time_fraction > 0)) {
    return Invalid("cache.shadow_max_time_fraction", "must be > 0");
  }
  if (absl::Status st = ValidateTauAutotuneOptions(k.autotune, k.shadow_sample_rate); !st.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("cache.autotune.", st.message()));
  }
  return absl::OkStatus();
}

absl::Status ValidateMetricsSection(const MetricsSection& m) {
  if (auto st = CheckRange("metrics.port", m.port, 0, 65535); !st.ok()) return st;
  if (m.port != 0 && m.address.empty()) {
    return Invalid("metrics.address", "must not be empty when metrics.port is set");
  }
  return absl::OkStatus();
}

// `max_body_bytes`: server.max_receive_message_bytes, the largest body one request may send.
absl::Status ValidateHttpSection(const HttpSection& h, int64_t max_body_bytes) {
  if (auto st = CheckRange("http.port", h.port, 0, 65535); !st.ok()) return st;
  if (auto st = CheckRange("http.threads", h.threads, 1, 256); !st.ok()) return st;
  if (auto st = CheckRange("http.max_connections", h.max_connections, 1, 1000000); !st.ok()) {
    return st;
  }
  if (auto st = CheckRange("http.max_connections_per_peer", h.max_connections_per_peer, 0,
                           h.max_connections);
      !st.ok()) {
    return st;
  }
  if (auto st = CheckRange("http.read_timeout_seconds", h.read_timeout_seconds, 1, 3600);
      !st.ok()) {
    return st;
  }
  // Capped at read_timeout_seconds where that is shorter (the whole request's deadline).
  if (auto st = CheckRange("http.head_timeout_seconds", h.head_timeout_seconds, 1, 3600);
      !st.ok()) {
    return st;
  }
  if (auto st = CheckRange("http.max_buffered_body_bytes", h.max_buffered_body_bytes,
                           max_body_bytes, int64_t{1} << 40);
      !st.ok()) {
    return st;
  }
  if (h.port != 0 && h.address.empty()) {
    return Invalid("http.address", "must not be empty when http.port is set");
  }
  return absl::OkStatus();
}

// One reader per section, called in the file's documented order. They share `error`: the
// first error wins and the reads after it do nothing, as in MapReader.
void ReadServerSection(MapReader& top, std::string* error, ServerSection* s) {
  MapReader r(top.Child("server"), "server", error);
  r.Read("address", &s->address);
  r.Read("threads", &s->threads);
  r.Read("max_receive_message_bytes", &s->max_receive_message_bytes);
  r.Read("max_send_message_bytes", &s->max_send_message_bytes);
  r.Read("drain_timeout_seconds", &s->drain_timeout_seconds);
  r.Read("lame_duck_seconds", &s->lame_duck_seconds);
  r.Read("max_connection_age_seconds", &s->max_connection_age_seconds);
  r.Read("warmup", &s->warmup);
  r.CheckUnknownKeys();
}

void ReadTlsSection(MapReader& top, std::string* error, TlsSection* tls) {
  MapReader r(top.Child("tls"), "tls", error);
  r.Read("cert", &tls->cert);
  r.Read("key", &tls->key);
  r.Read("client_ca", &tls->client_ca);
  r.CheckUnknownKeys();
}

void ReadAuthSection(MapReader& top, std::string* error, AuthSection* auth) {
  MapReader r(top.Child("auth"), "auth", error);
  r.Read("tokens_file", &auth->tokens_file);
  r.Read("tokens_env", &auth->tokens_env);
  r.CheckUnknownKeys();
}

void ReadEngineSection(MapReader& top, std::string* error, EngineSection* e) {
  MapReader r(top.Child("engine"), "engine", error);
  r.ReadEnum("backend", kBackends, &e->backend);
  r.Read("model", &e->model);
  r.Read("max_batch_sequences", &e->max_batch_sequences);
  r.Read("kv_budget_bytes", &e->kv_budget_bytes);
  r.Read("queue_capacity", &e->queue_capacity);
  r.Read("refuse_late_requests", &e->refuse_late_requests);
  r.Read("tau_switch_slack_ratio", &e->tau_switch_slack_ratio);
  r.Read("cpu_threads", &e->cpu_threads);
  r.CheckUnknownKeys();
}

void ReadDecodingSection(MapReader& top, std::string* error, DecodingDefaults* d) {
  MapReader r(top.Child("decoding"), "decoding", error);
  r.ReadOptional("max_new_tokens", &d->max_new_tokens);
  r.ReadParams(ParamSection::kDecoding, &d->fields);
  r.CheckUnknownKeys();
}

void ReadAutotuneSection(MapReader& cache, std::string* error, TauAutotuneOptions* t) {
  MapReader a(cache.Child("autotune"), "cache.autotune", error);
  a.Read("enabled", &t->enabled);
  a.Read("mismatch_budget", &t->mismatch_budget);
  a.Read("window_samples", &t->window_samples);
  a.Read("step_factor", &t->step_factor);
  a.Read("min_scale", &t->min_scale);
  a.Read("max_scale", &t->max_scale);
  a.CheckUnknownKeys();
}

void ReadCacheSection(MapReader& top, std::string* error, CacheDefaults* k) {
  MapReader r(top.Child("cache"), "cache", error);
  // The server's own keys first: cache.shadow_sample_rate here is the engine-wide rate (the
  // request field of that name overrides it per request), so the table's field is skipped.
  r.Read("shadow_sample_rate", &k->shadow_sample_rate);
  r.Read("shadow_max_time_fraction", &k->shadow_max_time_fraction);
  ReadAutotuneSection(r, error, &k->autotune);
  r.ReadParams(ParamSection::kCache, &k->fields);
  r.CheckUnknownKeys();
}

void ReadLimitsSection(MapReader& top, std::string* error, LimitsSection* l) {
  MapReader r(top.Child("limits"), "limits", error);
  for (const LimitField& f : LimitFields()) {
    std::visit([&](auto member) { r.Read(f.name, &(l->*member)); }, f.member);
  }
  r.ReadEnumList("allowed_cache_policies", kCachePolicies, &l->allowed_cache_policies);
  r.CheckUnknownKeys();
}

void ReadMetricsSection(MapReader& top, std::string* error, MetricsSection* m) {
  MapReader r(top.Child("metrics"), "metrics", error);
  r.Read("address", &m->address);
  r.Read("port", &m->port);
  r.CheckUnknownKeys();
}

void ReadLoggingSection(MapReader& top, std::string* error, LoggingSection* g) {
  MapReader r(top.Child("logging"), "logging", error);
  r.ReadEnum("level", kLogLevels, &g->level);
  r.ReadEnum("format", kLogFormats, &g->format);
  r.CheckUnknownKeys();
}

void ReadHttpSection(MapReader& top, std::string* error, HttpSection* h) {
  MapReader r(top.Child("http"), "http", error);
  r.Read("address", &h->address);
  r.Read("port", &h->port);
  r.Read("threads", &h->threads);
  r.Read("max_connections", &h->max_connections);
  r.Read("max_connections_per_peer", &h->max_connections_per_peer);
  r.Read("head_timeout_seconds", &h->head_timeout_seconds);
  r.Read("read_timeout_seconds", &h->read_timeout_seconds);
  r.Read("max_buffered_body_bytes", &h->max_buffered_body_bytes);
  r.Read("model_name", &h->model_name);
  r.CheckUnknownKeys();
}

}  // namespace

// Sections in a fixed order: the first failing check is the one reported.
absl::Status ValidateServerConfig(const ServerConfig& c) {
  DLLM_RETURN_IF_ERROR(ValidateServerSection(c.server));
  DLLM_RETURN_IF_ERROR(ValidateTlsSection(c.tls));
  DLLM_RETURN_IF_ERROR(ValidateEngineSection(c.engine));
  DLLM_RETURN_IF_ERROR(ValidateLimitsSection(c.limits));
  DLLM_RETURN_IF_ERROR(ValidateRequestDefaults(c));
  DLLM_RETURN_IF_ERROR(ValidateMetricsSection(c.metrics));
  DLLM_RETURN_IF_ERROR(ValidateHttpSection(c.http, c.server.max_receive_message_bytes));
  return absl::OkStatus();
}

absl::StatusOr<ServerConfig> ParseServerConfig(std::string_view yaml_text,
                                               std::string_view source) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(yaml_text));
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(std::string(source),
                                                   ": YAML syntax error at line ", e.mark.line + 1,
                                                   ", column ", e.mark.column + 1, ": ", e.msg));
  }
  ServerConfig c;
  std::string error;
  MapReader top(root, "", &error);
  ReadServerSection(top, &error, &c.server);
  ReadTlsSection(top, &error, &c.tls);
  ReadAuthSection(top, &error, &c.auth);
  ReadEngineSection(top, &error, &c.engine);
  ReadDecodingSection(top, &error, &c.decoding);
  ReadCacheSection(top, &error, &c.cache);
  ReadLimitsSection(top, &error, &c.limits);
  ReadMetricsSection(top, &error, &c.metrics);
  ReadLoggingSection(top, &error, &c.logging);
  ReadHttpSection(top, &error, &c.http);
  top.CheckUnknownKeys();
  if (!error.empty())
    return absl::InvalidArgumentError(absl::StrCat(std::string(source), ": ", error));
  if (absl::Status st = ValidateServerConfig(c); !st.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(std::string(source), ": ", st.message()));
  }
  return c;
}

absl::StatusOr<ServerConfig> LoadServerConfig(const std::string& path) {
  absl::StatusOr<std::string> text = ReadFileText(path, uint64_t{16} << 20);
  if (!text.ok()) {
    return absl::Status(text.status().code(),
                        absl::StrCat("config file ", text.status().message()));
  }
  return ParseServerConfig(*text, path);
}

}  // namespace dllm
