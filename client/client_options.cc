#include "client/client_options.h"

#include <functional>
#include <map>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace dllm::client {
namespace {

absl::Status Bad(const std::string& flag, const std::string& value, const char* expected) {
  return absl::InvalidArgumentError(absl::StrCat(flag, ": '", value, "' is not ", expected));
}

template <typename T>
absl::Status SetNumber(const std::string& flag, const std::string& value, T* out) {
  T parsed{};
  bool ok = false;
  if constexpr (std::is_same_v<T, float>) {
    ok = absl::SimpleAtof(value, &parsed);
  } else if constexpr (std::is_same_v<T, double>) {
    ok = absl::SimpleAtod(value, &parsed);
  } else {
    ok = absl::SimpleAtoi(value, &parsed);
  }
  if (!ok) return Bad(flag, value, "a number");
  *out = parsed;
  return absl::OkStatus();
}

template <typename T>
absl::Status SetOptional(const std::string& flag, const std::string& value, std::optional<T>* out) {
  T parsed{};
  if (absl::Status st = SetNumber(flag, value, &parsed); !st.ok()) return st;
  *out = parsed;
  return absl::OkStatus();
}

}  // namespace

const char* ClientUsage() {
  return R"(usage: dllm-client [options] <command> [options] [PROMPT]   (options before or after)
commands:
  generate   one unary Generate call; prints the answer (--json: the whole response)
  stream     GenerateStream; prints committed text as it arrives (--show-canvas redraws the
             forming canvas), then a summary on stderr
  tokenize   Tokenize PROMPT or --chat
  info       GetModelInfo (JSON)
  health     grpc.health.v1 Check; exit 0 only when SERVING (--service NAME, --wait SECONDS)
  services   list the services the server exposes through reflection
  load       load test: --concurrency N with --duration SECONDS or --requests N [--stream
             [--cancel-after N]]; prints latency percentiles, throughput and errors by status
connection: --address HOST:PORT --tls --ca FILE --cert FILE --key FILE --server-name NAME
            --token TOKEN --token-file FILE (or env DLLM_TOKEN) --timeout SECONDS --json
input:      PROMPT | --prompt TEXT | --chat TEXT [--system TEXT] | --ids 1,2,3
generation: --max-new-tokens N --schedule block|timestep|window --remasking NAME --steps N
            --block-length N --window N --threshold X --temperature X --top-k N --top-p X
            --seed N --eps X --alg-temp X --cache none|entropy|dual|interval|prefix|d2cache|elastic
            --entropy-threshold X --recent-k N --refresh-interval N --request-id ID
stream:     --canvas-every N --show-canvas --cancel-after N
)";
}

absl::StatusOr<ClientOptions> ParseClientOptions(const std::vector<std::string>& args) {
  ClientOptions o;

  using Setter = std::function<absl::Status(const std::string& flag, const std::string& v)>;
  const std::map<std::string, Setter> valued = {
      {"--address",
       [&](auto&, auto& v) {
         o.address = v;
         return absl::OkStatus();
       }},
      {"--ca",
       [&](auto&, auto& v) {
         o.ca_file = v;
         o.tls = true;
         return absl::OkStatus();
       }},
      {"--cert",
       [&](auto&, auto& v) {
         o.cert_file = v;
         o.tls = true;
         return absl::OkStatus();
       }},
      {"--key",
       [&](auto&, auto& v) {
         o.key_file = v;
         o.tls = true;
         return absl::OkStatus();
       }},
      {"--server-name",
       [&](auto&, auto& v) {
         o.server_name = v;
         return absl::OkStatus();
       }},
      {"--token",
       [&](auto&, auto& v) {
         o.token = v;
         return absl::OkStatus();
       }},
      {"--token-file",
       [&](auto&, auto& v) {
         o.token_file = v;
         return absl::OkStatus();
       }},
      {"--timeout", [&](auto& f, auto& v) { return SetOptional(f, v, &o.timeout_seconds); }},
      {"--prompt",
       [&](auto&, auto& v) {
         o.prompt = v;
         return absl::OkStatus();
       }},
      {"--chat",
       [&](auto&, auto& v) {
         o.chat = v;
         return absl::OkStatus();
       }},
      {"--system",
       [&](auto&, auto& v) {
         o.system = v;
         return absl::OkStatus();
       }},
      {"--ids",
       [&](auto& f, auto& v) -> absl::Status {
         std::vector<int32_t> ids;
         for (absl::string_view part : absl::StrSplit(v, ',', absl::SkipEmpty())) {
           int32_t id = 0;
           if (!absl::SimpleAtoi(part, &id)) return Bad(f, v, "a comma-separated id list");
           ids.push_back(id);
         }
         o.ids = ids;
         return absl::OkStatus();
       }},
      {"--request-id",
       [&](auto&, auto& v) {
         o.request_id = v;
         return absl::OkStatus();
       }},
      {"--max-new-tokens", [&](auto& f, auto& v) { return SetOptional(f, v, &o.max_new_tokens); }},
      {"--schedule",
       [&](auto&, auto& v) {
         o.schedule = v;
         return absl::OkStatus();
       }},
      {"--remasking",
       [&](auto&, auto& v) {
         o.remasking = v;
         return absl::OkStatus();
       }},
      {"--steps", [&](auto& f, auto& v) { return SetOptional(f, v, &o.steps); }},
      {"--block-length", [&](auto& f, auto& v) { return SetOptional(f, v, &o.block_length); }},
      {"--window", [&](auto& f, auto& v) { return SetOptional(f, v, &o.window); }},
      {"--threshold", [&](auto& f, auto& v) { return SetOptional(f, v, &o.threshold); }},
      {"--temperature", [&](auto& f, auto& v) { return SetOptional(f, v, &o.temperature); }},
      {"--top-k", [&](auto& f, auto& v) { return SetOptional(f, v, &o.top_k); }},
      {"--top-p", [&](auto& f, auto& v) { return SetOptional(f, v, &o.top_p); }},
      {"--seed", [&](auto& f, auto& v) { return SetOptional(f, v, &o.seed); }},
      {"--eps", [&](auto& f, auto& v) { return SetOptional(f, v, &o.eps); }},
      {"--alg-temp", [&](auto& f, auto& v) { return SetOptional(f, v, &o.alg_temp); }},
      {"--cache",
       [&](auto&, auto& v) {
         o.cache = v;
         return absl::OkStatus();
       }},
      {"--entropy-threshold",
       [&](auto& f, auto& v) { return SetOptional(f, v, &o.entropy_threshold); }},
      {"--recent-k", [&](auto& f, auto& v) { return SetOptional(f, v, &o.recent_k); }},
      {"--refresh-interval",
       [&](auto& f, auto& v) { return SetOptional(f, v, &o.refresh_interval); }},
      {"--canvas-every", [&](auto& f, auto& v) { return SetNumber(f, v, &o.canvas_every); }},
      {"--cancel-after", [&](auto& f, auto& v) { return SetNumber(f, v, &o.cancel_after); }},
      {"--service",
       [&](auto&, auto& v) {
         o.service = v;
         return absl::OkStatus();
       }},
      {"--wait", [&](auto& f, auto& v) { return SetNumber(f, v, &o.wait_seconds); }},
      {"--concurrency", [&](auto& f, auto& v) { return SetNumber(f, v, &o.concurrency); }},
      {"--duration", [&](auto& f, auto& v) { return SetOptional(f, v, &o.duration_seconds); }},
      {"--requests", [&](auto& f, auto& v) { return SetOptional(f, v, &o.requests); }},
  };
  const std::map<std::string, bool*> boolean = {
      {"--tls", &o.tls},
      {"--json", &o.json},
      {"--show-canvas", &o.show_canvas},
      {"--stream", &o.stream},
  };
  // Options may come before or after the command (as with git, kubectl and grpcurl): the
  // first word that is neither an option nor an option's value is the command, the next the
  // prompt.
  for (size_t i = 0; i < args.size(); ++i) {
    std::string flag = args[i];
    if (flag.rfind("--", 0) != 0) {
      if (o.command.empty()) {
        static const char* kCommands[] = {"generate", "stream",   "tokenize", "info",
                                          "health",   "services", "load"};
        bool known = false;
        for (const char* c : kCommands) known |= (flag == c);
        if (!known) return absl::InvalidArgumentError(absl::StrCat("unknown command '", flag, "'"));
        o.command = flag;
        continue;
      }
      if (o.prompt) return absl::InvalidArgumentError("more than one prompt given");
      o.prompt = flag;
      continue;
    }
    std::optional<std::string> value;
    if (const size_t eq = flag.find('='); eq != std::string::npos) {
      value = flag.substr(eq + 1);
      flag = flag.substr(0, eq);
    }
    if (auto b = boolean.find(flag); b != boolean.end()) {
      if (value) return absl::InvalidArgumentError(absl::StrCat(flag, " takes no value"));
      *b->second = true;
      continue;
    }
    auto it = valued.find(flag);
    if (it == valued.end()) {
      return absl::InvalidArgumentError(absl::StrCat("unknown flag '", flag, "'"));
    }
    if (!value) {
      if (i + 1 >= args.size()) {
        return absl::InvalidArgumentError(absl::StrCat(flag, ": missing value"));
      }
      value = args[++i];
    }
    if (absl::Status st = it->second(flag, *value); !st.ok()) return st;
  }
  if (o.command.empty()) return absl::InvalidArgumentError("missing command");
  if (o.show_canvas && o.canvas_every == 0) o.canvas_every = 1;
  if (o.concurrency < 1) return absl::InvalidArgumentError("--concurrency: must be >= 1");
  if (o.command == "load" && !o.duration_seconds && !o.requests) o.requests = 10;
  if (!o.cert_file.empty() != !o.key_file.empty()) {
    return absl::InvalidArgumentError("--cert and --key must be given together");
  }
  return o;
}

}  // namespace dllm::client
