// Command-line options of dllm-client.
//
//   dllm-client [options] <generate|stream|tokenize|info|health|services|load> [options] [PROMPT]
//
// Options may come before or after the command. The flags are Abseil flags defined in
// client/client_flags.cc, which reads them into a ClientOptions.
// Connection: --address HOST:PORT (default localhost:50051), --tls, --ca FILE (server CA,
// implies --tls), --cert FILE --key FILE (client certificate for mutual TLS), --server-name
// NAME (TLS name override), --token TOKEN | --token-file FILE (else env DLLM_TOKEN),
// --timeout SECONDS (call deadline), --json (machine-readable output).
// Input: PROMPT or --prompt TEXT, --chat TEXT (user message) with optional --system TEXT,
// --ids 1,2,3. Generation: --max-new-tokens, --request-id, and one flag per request field of
// engine/core/param_fields.h, by name or alias (--confidence-threshold or --threshold,
// --policy or --cache, --entropy-threshold or --tau, --d2-rollout-p, --elastic-gamma, ...). Stream:
// --canvas-every N, --show-canvas, --cancel-after N (cancel after N committed deltas). Health:
// --service NAME, --wait SECONDS. Load: --concurrency N,
// --duration SECONDS or --requests N, --stream.
#ifndef DLLM_CLIENT_CLIENT_OPTIONS_H_
#define DLLM_CLIENT_CLIENT_OPTIONS_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/core/param_fields.h"

namespace dllm::client {

// dllm-client load runs one thread per concurrent call.
inline constexpr int kMaxLoadConcurrency = 1024;

struct ClientOptions {
  bool help = false;  // -h or --help: print ClientUsage() and nothing else
  std::string command;
  // connection
  std::string address = "localhost:50051";
  bool tls = false;
  std::string ca_file;
  std::string cert_file;
  std::string key_file;
  std::string server_name;
  std::string token;
  std::string token_file;
  std::optional<double> timeout_seconds;
  bool json = false;
  // input
  std::optional<std::string> prompt;
  std::optional<std::string> chat;
  std::optional<std::string> system;
  std::optional<std::vector<int32_t>> ids;
  // generation (unset = server default)
  std::string request_id;
  std::optional<int> max_new_tokens;
  // The decoding.* and cache.* fields given as flags, read by the table
  // (engine/core/param_fields.h), validated only by type here: the server checks the ranges.
  ParamOverrides params;
  // stream
  int canvas_every = 0;
  bool show_canvas = false;
  int cancel_after = 0;
  // health
  std::string service;
  double wait_seconds = 0;
  // load
  int concurrency = 1;  // [1, kMaxLoadConcurrency]
  std::optional<double> duration_seconds;
  std::optional<int> requests;
  bool stream = false;
};

// Completes options read from the flags (client/client_flags.h) with the positional
// arguments, the command and then the prompt, and checks them: INVALID_ARGUMENT for a missing
// or unknown command, a second prompt, or options that do not go together.
absl::StatusOr<ClientOptions> FinishClientOptions(ClientOptions options,
                                                  const std::vector<std::string>& positional);

std::string ClientUsage();

// The command-line spellings of the request fields (every name and alias of the table), for
// cli::ParseFlags' `repeated` options, and their values read into `out` (the last value of a
// flag given twice counts). INVALID_ARGUMENT "--<flag>: ..." for a value of the wrong type.
std::vector<std::string> ParamFlagNames();
absl::Status ReadParamFlags(const std::map<std::string, std::vector<std::string>>& given,
                            ParamOverrides* out);

}  // namespace dllm::client

#endif  // DLLM_CLIENT_CLIENT_OPTIONS_H_
