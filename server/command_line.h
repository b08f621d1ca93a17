// Command-line options of dllm-server. Flags override values read from --config.
//
//   --config PATH     YAML configuration (default: built-in defaults, see config/default.yaml)
//   --model DIR       engine.model
//   --port N          port part of server.address
//   --backend NAME    engine.backend (cpu | cuda)
//   --metrics-port N  metrics.port (0 disables)
//   --http-port N     http.port: the OpenAI-compatible HTTP API (0 disables)
//   --help
// Both "--flag value" and "--flag=value" are accepted. The flags themselves are Abseil flags
// defined in server/server_flags.cc, which reads them into a CommandLine.
#ifndef DLLM_SERVER_COMMAND_LINE_H_
#define DLLM_SERVER_COMMAND_LINE_H_

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "server/config.h"

namespace dllm {

struct CommandLine {
  std::optional<std::string> config_path;
  std::optional<std::string> model;
  std::optional<int> port;
  std::optional<BackendKind> backend;
  std::optional<int> metrics_port;
  std::optional<int> http_port;
  bool help = false;
};

// Applies the overrides and re-validates the result.
absl::Status ApplyCommandLine(const CommandLine& command_line, ServerConfig* config);

const char* CommandLineUsage();

}  // namespace dllm

#endif  // DLLM_SERVER_COMMAND_LINE_H_
