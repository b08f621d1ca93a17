#include "server/command_line.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace dllm {
namespace {

absl::StatusOr<int> ParsePort(const std::string& flag, const std::string& value) {
  int port = 0;
  if (!absl::SimpleAtoi(value, &port) || port < 0 || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, ": '", value, "' is not a port number (0..65535)"));
  }
  return port;
}

}  // namespace

const char* CommandLineUsage() {
  return "usage: dllm-server [--config PATH] [--model DIR] [--port N] [--backend cpu|cuda]\n"
         "                   [--metrics-port N] [--http-port N]\n";
}

absl::StatusOr<CommandLine> ParseCommandLine(const std::vector<std::string>& args) {
  CommandLine cl;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string flag = args[i];
    std::optional<std::string> value;
    if (const size_t eq = flag.find('='); flag.rfind("--", 0) == 0 && eq != std::string::npos) {
      value = flag.substr(eq + 1);
      flag = flag.substr(0, eq);
    }
    if (flag == "--help" || flag == "-h") {
      cl.help = true;
      continue;
    }
    static constexpr absl::string_view kValued[] = {"--config",  "--model",        "--port",
                                                    "--backend", "--metrics-port", "--http-port"};
    bool valued = false;
    for (auto known : kValued) valued |= (flag == known);
    if (!valued) return absl::InvalidArgumentError(absl::StrCat("unknown flag '", flag, "'"));
    if (!value) {
      if (i + 1 >= args.size()) {
        return absl::InvalidArgumentError(absl::StrCat(flag, ": missing value"));
      }
      value = args[++i];
    }
    if (flag == "--config") {
      cl.config_path = *value;
    } else if (flag == "--model") {
      cl.model = *value;
    } else if (flag == "--port") {
      absl::StatusOr<int> port = ParsePort(flag, *value);
      if (!port.ok()) return port.status();
      cl.port = *port;
    } else if (flag == "--metrics-port") {
      absl::StatusOr<int> port = ParsePort(flag, *value);
      if (!port.ok()) return port.status();
      cl.metrics_port = *port;
    } else if (flag == "--http-port") {
      absl::StatusOr<int> port = ParsePort(flag, *value);
      if (!port.ok()) return port.status();
      cl.http_port = *port;
    } else if (flag == "--backend") {
      cl.backend = ParseBackend(*value);
      if (!cl.backend) {
        return absl::InvalidArgumentError(
            absl::StrCat("--backend: unknown backend '", *value, "' (expected cpu|cuda)"));
      }
    }
  }
  return cl;
}

absl::Status ApplyCommandLine(const CommandLine& cl, ServerConfig* config) {
  if (cl.model) config->engine.model = *cl.model;
  if (cl.backend) config->engine.backend = *cl.backend;
  if (cl.metrics_port) config->metrics.port = *cl.metrics_port;
  if (cl.http_port) config->http.port = *cl.http_port;
  if (cl.port) {
    std::string& address = config->server.address;
    const size_t colon = address.rfind(':');
    const std::string host = colon == std::string::npos ? "0.0.0.0" : address.substr(0, colon);
    address = absl::StrCat(host, ":", *cl.port);
  }
  return ValidateServerConfig(*config);
}

}  // namespace dllm
