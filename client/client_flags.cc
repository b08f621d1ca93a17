// dllm-client's flags. They are read only here, once, into a ClientOptions
// (client/client_options.h); their defaults are ClientOptions' own.
#include "client/client_flags.h"

#include <cstdint>
#include <optional>

#include "absl/flags/flag.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "cli/flags.h"

// connection
ABSL_FLAG(std::string, address, dllm::client::ClientOptions().address, "server HOST:PORT");
ABSL_FLAG(bool, tls, false, "connect with TLS");
ABSL_FLAG(std::string, ca, "", "server CA file (implies --tls)");
ABSL_FLAG(std::string, cert, "", "client certificate for mutual TLS (with --key)");
ABSL_FLAG(std::string, key, "", "client key for mutual TLS (with --cert)");
ABSL_FLAG(std::string, server_name, "", "TLS name override");
ABSL_FLAG(std::string, token, "", "bearer token (else --token-file, else env DLLM_TOKEN)");
ABSL_FLAG(std::string, token_file, "", "file holding the bearer token");
ABSL_FLAG(std::optional<double>, timeout, std::nullopt, "call deadline in seconds");
ABSL_FLAG(bool, json, false, "machine-readable output");
// input
ABSL_FLAG(std::optional<std::string>, prompt, std::nullopt, "prompt text");
ABSL_FLAG(std::optional<std::string>, chat, std::nullopt, "user message (chat template)");
ABSL_FLAG(std::optional<std::string>, system, std::nullopt, "system message for --chat");
ABSL_FLAG(std::optional<std::string>, ids, std::nullopt, "token ids: 1,2,3");
// generation (unset = server default)
ABSL_FLAG(std::string, request_id, "", "request id");
ABSL_FLAG(std::optional<int>, max_new_tokens, std::nullopt, "tokens to generate");
// the decoding.* and cache.* fields: ParamFlagNames() (client_options.h), from the table
// stream
ABSL_FLAG(int, canvas_every, 0, "send the canvas every N steps");
ABSL_FLAG(bool, show_canvas, false, "redraw the forming canvas");
ABSL_FLAG(int, cancel_after, 0, "cancel after N committed deltas");
// health
ABSL_FLAG(std::string, service, "", "health: service name");
ABSL_FLAG(double, wait, 0, "health: wait up to SECONDS for SERVING");
// load
ABSL_FLAG(int, concurrency, 1, "load: concurrent calls");
ABSL_FLAG(std::optional<double>, duration, std::nullopt, "load: run for SECONDS");
ABSL_FLAG(std::optional<int>, requests, std::nullopt, "load: number of requests");
ABSL_FLAG(bool, stream, false, "load: use GenerateStream");

namespace dllm::client {
namespace {

absl::Status ReadFlags(ClientOptions* options) {
  ClientOptions& o = *options;
  o.address = absl::GetFlag(FLAGS_address);
  o.tls = absl::GetFlag(FLAGS_tls);
  o.ca_file = absl::GetFlag(FLAGS_ca);
  o.cert_file = absl::GetFlag(FLAGS_cert);
  o.key_file = absl::GetFlag(FLAGS_key);
  o.server_name = absl::GetFlag(FLAGS_server_name);
  o.token = absl::GetFlag(FLAGS_token);
  o.token_file = absl::GetFlag(FLAGS_token_file);
  o.timeout_seconds = absl::GetFlag(FLAGS_timeout);
  o.json = absl::GetFlag(FLAGS_json);
  o.prompt = absl::GetFlag(FLAGS_prompt);
  o.chat = absl::GetFlag(FLAGS_chat);
  o.system = absl::GetFlag(FLAGS_system);
  if (const std::optional<std::string> ids = absl::GetFlag(FLAGS_ids)) {
    o.ids.emplace();
    for (absl::string_view part : absl::StrSplit(*ids, ',', absl::SkipEmpty())) {
      int32_t id = 0;
      if (!absl::SimpleAtoi(part, &id)) {
        return absl::InvalidArgumentError(
            absl::StrCat("--ids: '", *ids, "' is not a comma-separated id list"));
      }
      o.ids->push_back(id);
    }
  }
  o.request_id = absl::GetFlag(FLAGS_request_id);
  o.max_new_tokens = absl::GetFlag(FLAGS_max_new_tokens);
  o.canvas_every = absl::GetFlag(FLAGS_canvas_every);
  o.show_canvas = absl::GetFlag(FLAGS_show_canvas);
  o.cancel_after = absl::GetFlag(FLAGS_cancel_after);
  o.service = absl::GetFlag(FLAGS_service);
  o.wait_seconds = absl::GetFlag(FLAGS_wait);
  o.concurrency = absl::GetFlag(FLAGS_concurrency);
  o.duration_seconds = absl::GetFlag(FLAGS_duration);
  o.requests = absl::GetFlag(FLAGS_requests);
  o.stream = absl::GetFlag(FLAGS_stream);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ClientOptions> ParseClientOptions(const std::vector<std::string>& args) {
  ClientOptions o;
  std::vector<std::string> positional;
  absl::Status st = cli::ParseFlags(args, ParamFlagNames(), [&](const cli::ParsedArgs& parsed) {
    o.help = parsed.help;
    positional = parsed.positional;
    if (absl::Status read = ReadParamFlags(parsed.repeated, &o.params); !read.ok()) return read;
    return ReadFlags(&o);
  });
  if (!st.ok()) return st;
  if (o.help) return o;
  return FinishClientOptions(std::move(o), positional);
}

}  // namespace dllm::client
