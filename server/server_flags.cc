// dllm-server's flags. They are read only here, once, into a CommandLine (server/command_line.h).
#include "server/server_flags.h"

#include <optional>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "cli/flags.h"

ABSL_FLAG(std::optional<std::string>, config, std::nullopt,
          "YAML configuration (default: built-in defaults, see config/default.yaml)");
ABSL_FLAG(std::optional<std::string>, model, std::nullopt, "model directory (engine.model)");
ABSL_FLAG(std::optional<int>, port, std::nullopt, "port part of server.address");
ABSL_FLAG(std::optional<std::string>, backend, std::nullopt, "engine.backend: cpu | cuda");
ABSL_FLAG(std::optional<int>, metrics_port, std::nullopt, "metrics.port (0 disables)");
ABSL_FLAG(std::optional<int>, http_port, std::nullopt,
          "http.port: the OpenAI-compatible HTTP API (0 disables)");

namespace dllm {
namespace {

absl::Status CheckPort(const char* flag, const std::optional<int>& port) {
  if (port && (*port < 0 || *port > 65535)) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, ": '", *port, "' is not a port number (0..65535)"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<CommandLine> ParseCommandLine(const std::vector<std::string>& args) {
  CommandLine cl;
  absl::Status st = cli::ParseFlags(args, {}, [&cl](const cli::ParsedArgs& parsed) {
    if (parsed.help) {
      cl.help = true;
      return absl::OkStatus();
    }
    if (!parsed.positional.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("unexpected argument '", parsed.positional[0], "'"));
    }
    cl.config_path = absl::GetFlag(FLAGS_config);
    cl.model = absl::GetFlag(FLAGS_model);
    cl.port = absl::GetFlag(FLAGS_port);
    cl.metrics_port = absl::GetFlag(FLAGS_metrics_port);
    cl.http_port = absl::GetFlag(FLAGS_http_port);
    if (const std::optional<std::string> backend = absl::GetFlag(FLAGS_backend)) {
      cl.backend = ParseBackend(*backend);
      if (!cl.backend) {
        return absl::InvalidArgumentError(
            absl::StrCat("--backend: unknown backend '", *backend, "' (expected cpu|cuda)"));
      }
    }
    return absl::OkStatus();
  });
  if (!st.ok()) return st;
  for (auto [flag, port] : {std::pair{"--port", cl.port},
                            {"--metrics-port", cl.metrics_port},
                            {"--http-port", cl.http_port}}) {
    if (absl::Status bad = CheckPort(flag, port); !bad.ok()) return bad;
  }
  return cl;
}

}  // namespace dllm
