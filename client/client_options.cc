#include "client/client_options.h"

#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"

namespace dllm::client {

std::string ClientUsage() {
  std::string usage =
      R"(usage: dllm-client [options] <command> [options] [PROMPT]   (options before or after)
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
             (exit 1 when no call succeeded, unless --cancel-after cancels them all)
connection: --address HOST:PORT --tls --ca FILE --cert FILE --key FILE --server-name NAME
            --token TOKEN --token-file FILE (or env DLLM_TOKEN) --timeout SECONDS --json
input:      PROMPT | --prompt TEXT | --chat TEXT [--system TEXT] | --ids 1,2,3
generation: --max-new-tokens N --request-id ID, and the request fields (unset: the server's
            default; the server checks the ranges):
)";
  for (const ParamField& f : ParamFields()) {
    // Spelled with dashes, as the other flags; underscores work too (cli/flags.h).
    std::string flag = absl::StrCat("--", f.name);
    if (!f.alias.empty()) absl::StrAppend(&flag, " (--", f.alias, ")");
    absl::StrReplaceAll({{"_", "-"}}, &flag);
    absl::StrAppend(&usage, "  ", flag, " ", DomainText(f), f.unit.empty() ? "" : " ", f.unit,
                    "\n      ", f.doc, "\n");
  }
  absl::StrAppend(&usage, "stream:     --canvas-every N --show-canvas --cancel-after N\n");
  return usage;
}

std::vector<std::string> ParamFlagNames() {
  std::vector<std::string> names;
  for (const ParamField& f : ParamFields()) {
    names.emplace_back(f.name);
    if (!f.alias.empty()) names.emplace_back(f.alias);
  }
  return names;
}

absl::Status ReadParamFlags(const std::map<std::string, std::vector<std::string>>& given,
                            ParamOverrides* out) {
  for (const auto& [name, values] : given) {
    const ParamField* f = FindParamField(ParamSection::kDecoding, name);
    if (f == nullptr) f = FindParamField(ParamSection::kCache, name);
    if (f == nullptr || values.empty()) continue;  // another repeated option
    // As with the other flags, the last value given counts.
    absl::StatusOr<ParamValue> value = ParseParamText(*f, values.back());
    if (!value.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--", name, ": ", value.status().message()));
    }
    out->Set(*f, *value);
  }
  return absl::OkStatus();
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
  // One thread per concurrent call: beyond the cap a typo exhausts threads and aborts.
  if (o.concurrency < 1 || o.concurrency > kMaxLoadConcurrency) {
    return absl::InvalidArgumentError(
        absl::StrCat("--concurrency: must be in [1, ", kMaxLoadConcurrency, "]"));
  }
  for (const auto& [flag, value] :
       {std::pair{"--timeout", o.timeout_seconds}, std::pair{"--duration", o.duration_seconds}}) {
    if (value && !(*value > 0 && std::isfinite(*value))) {
      return absl::InvalidArgumentError(
          absl::StrCat(flag, ": must be a positive number of seconds"));
    }
  }
  if (o.requests && *o.requests < 1) return absl::InvalidArgumentError("--requests: must be >= 1");
  if (o.command == "load" && !o.duration_seconds && !o.requests) o.requests = 10;
  if (!o.cert_file.empty() != !o.key_file.empty()) {
    return absl::InvalidArgumentError("--cert and --key must be given together");
  }
  return o;
}

}  // namespace dllm::client
