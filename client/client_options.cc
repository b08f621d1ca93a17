#include "client/client_options.h"

#include "absl/strings/str_cat.h"

namespace dllm::client {

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

absl::StatusOr<ClientOptions> FinishClientOptions(ClientOptions o,
                                                  const std::vector<std::string>& positional) {
  // Options may come before or after the command (as with git, kubectl and grpcurl): the
  // first positional argument is the command, the next the prompt.
  for (const std::string& arg : positional) {
    if (o.command.empty()) {
      static const char* kCommands[] = {"generate", "stream",   "tokenize", "info",
                                        "health",   "services", "load"};
      bool known = false;
      for (const char* c : kCommands) known |= (arg == c);
      if (!known) return absl::InvalidArgumentError(absl::StrCat("unknown command '", arg, "'"));
      o.command = arg;
      continue;
    }
    if (o.prompt) return absl::InvalidArgumentError("more than one prompt given");
    o.prompt = arg;
  }
  if (o.command.empty()) return absl::InvalidArgumentError("missing command");
  // A CA or a client certificate means TLS.
  if (!o.ca_file.empty() || !o.cert_file.empty() || !o.key_file.empty()) o.tls = true;
  if (o.show_canvas && o.canvas_every == 0) o.canvas_every = 1;
  if (o.concurrency < 1) return absl::InvalidArgumentError("--concurrency: must be >= 1");
  if (o.command == "load" && !o.duration_seconds && !o.requests) o.requests = 10;
  if (!o.cert_file.empty() != !o.key_file.empty()) {
    return absl::InvalidArgumentError("--cert and --key must be given together");
  }
  return o;
}

}  // namespace dllm::client
