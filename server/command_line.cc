#include "server/command_line.h"

#include "absl/strings/str_cat.h"

namespace dllm {

const char* CommandLineUsage() {
  return "usage: dllm-server [--config PATH] [--model DIR] [--port N] [--backend cpu|cuda]\n"
         "                   [--metrics-port N] [--http-port N]\n";
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
