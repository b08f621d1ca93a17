// dllm-client: command-line client of dllm-serve (see client_options.h for the options,
// client_flags.cc for their flags).
// Exit codes: 0 success, 1 the call failed (stderr: "error: <CODE>: <message>"), 2 usage.
#include <google/protobuf/util/json_util.h>
#include <grpcpp/grpcpp.h>

#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "client/client_flags.h"
#include "client/client_options.h"
#include "client/connection.h"
#include "client/grpc_code_name.h"
#include "client/health_check.h"
#include "client/load_test.h"
#include "client/reflection_list.h"
#include "client/request_builder.h"
#include "dllm/v1/dllm.grpc.pb.h"

namespace dllm::client {
namespace {

std::string ToJson(const google::protobuf::Message& message, bool pretty) {
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = pretty;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = true;
  std::string out;
  (void)google::protobuf::util::MessageToJsonString(message, &out, options);
  if (pretty && !out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

int Fail(const grpc::Status& status) {
  std::cerr << "error: " << GrpcCodeName(status.error_code()) << ": " << status.error_message()
            << "\n";
  return 1;
}

int Fail(const absl::Status& status, int code) {
  std::cerr << "error: " << status.message() << "\n";
  return code;
}

void PrintSummary(const v1::GenerateResponse& r) {
  const std::string reason = v1::FinishReason_Name(r.finish_reason()).substr(14);  // FINISH_REASON_
  std::cerr << absl::StrFormat(
      "[finish=%s prompt_tokens=%d generated_tokens=%d steps=%d full_steps=%d refresh_ratio=%.3f "
      "total=%.3fs first_commit=%.3fs%s]\n",
      reason.c_str(), r.usage().prompt_tokens(), r.usage().generated_tokens(),
      r.cache_stats().steps(), r.cache_stats().full_steps(), r.cache_stats().refresh_ratio(),
      r.timings().total_seconds(), r.timings().first_commit_seconds(),
      // SLO-aware tau: the step from which the server ran it at its tau under load.
      r.cache_stats().has_tau_switch_step()
          ? absl::StrFormat(" tau_switch_step=%d", r.cache_stats().tau_switch_step())
          : "");
}

int Generate(const ClientOptions& o, const Connection& c) {
  absl::StatusOr<v1::GenerateRequest> request = BuildGenerateRequest(o);
  if (!request.ok()) return Fail(request.status(), 2);
  auto stub = v1::DiffusionLM::NewStub(c.channel());
  grpc::ClientContext context;
  c.Prepare(&context);
  v1::GenerateResponse response;
  grpc::Status status = stub->Generate(&context, *request, &response);
  if (!status.ok()) return Fail(status);
  if (o.json) {
    std::cout << ToJson(response, true) << "\n";
  } else {
    std::cout << response.text() << "\n";
    PrintSummary(response);
  }
  return 0;
}

int Stream(const ClientOptions& o, const Connection& c) {
  absl::StatusOr<v1::GenerateRequest> request = BuildGenerateRequest(o);
  if (!request.ok()) return Fail(request.status(), 2);
  auto stub = v1::DiffusionLM::NewStub(c.channel());
  grpc::ClientContext context;
  c.Prepare(&context);
  auto reader = stub->GenerateStream(&context, *request);
  v1::GenerateStreamResponse message;
  std::string committed;
  int deltas = 0;
  bool cancelled_by_us = false;
  while (reader->Read(&message)) {
    if (o.json) {
      std::cout << ToJson(message, false) << "\n" << std::flush;
    } else if (message.has_committed()) {
      committed += message.committed().text();
      if (!o.show_canvas) std::cout << message.committed().text() << std::flush;
    } else if (message.has_canvas() && o.show_canvas) {
      // Redraw the forming canvas in place: clear the screen, home the cursor.
      std::cout << "\033[2J\033[H"
                << "step " << message.canvas().step() << "\n"
                << message.canvas().text() << std::flush;
    } else if (message.has_final()) {
      if (o.show_canvas) std::cout << "\033[2J\033[H" << message.final().text();
      std::cout << "\n";
      PrintSummary(message.final());
    }
    if (message.has_committed() && o.cancel_after > 0 && ++deltas == o.cancel_after &&
        !cancelled_by_us) {
      context.TryCancel();
      cancelled_by_us = true;
    }
  }
  grpc::Status status = reader->Finish();
  if (!status.ok()) return Fail(status);
  return 0;
}

int Tokenize(const ClientOptions& o, const Connection& c) {
  absl::StatusOr<v1::TokenizeRequest> request = BuildTokenizeRequest(o);
  if (!request.ok()) return Fail(request.status(), 2);
  auto stub = v1::DiffusionLM::NewStub(c.channel());
  grpc::ClientContext context;
  c.Prepare(&context);
  v1::TokenizeResponse response;
  grpc::Status status = stub->Tokenize(&context, *request, &response);
  if (!status.ok()) return Fail(status);
  if (o.json) {
    std::cout << ToJson(response, true) << "\n";
  } else {
    for (int i = 0; i < response.token_ids_size(); ++i) {
      std::cout << (i ? " " : "") << response.token_ids(i);
    }
    std::cout << "\n";
  }
  return 0;
}

int Info(const ClientOptions& o, const Connection& c) {
  auto stub = v1::DiffusionLM::NewStub(c.channel());
  grpc::ClientContext context;
  c.Prepare(&context);
  v1::GetModelInfoResponse response;
  grpc::Status status = stub->GetModelInfo(&context, v1::GetModelInfoRequest(), &response);
  if (!status.ok()) return Fail(status);
  std::cout << ToJson(response, true) << "\n";
  return 0;
}

int Health(const ClientOptions& o, const Connection& c) {
  const absl::Time until = absl::Now() + absl::Seconds(o.wait_seconds);
  std::string state;
  while (true) {
    state = CheckHealth(c, o.service, o.timeout_seconds.value_or(2.0));
    if (state == "SERVING" || absl::Now() >= until) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  std::cout << state << "\n";
  return state == "SERVING" ? 0 : 1;
}

int Services(const ClientOptions& o, const Connection& c) {
  absl::StatusOr<std::vector<std::string>> names = ListServices(c, o.timeout_seconds.value_or(5.0));
  if (!names.ok()) {
    std::cerr << "error: " << absl::StatusCodeToString(names.status().code()) << ": "
              << names.status().message() << "\n";
    return 1;
  }
  for (const std::string& name : *names) std::cout << name << "\n";
  return 0;
}

int Load(const ClientOptions& o, const Connection& c) {
  absl::StatusOr<v1::GenerateRequest> request = BuildGenerateRequest(o);
  if (!request.ok()) return Fail(request.status(), 2);
  LoadReport report = RunLoad(c, *request, o);
  std::cout << FormatLoadReport(report, o.json);
  // A load test in which no call succeeded measured nothing: a script must see it fail
  // (unless the client cancels every call itself, --cancel-after).
  if (report.requests > 0 && report.ok == 0 && o.cancel_after == 0) {
    std::cerr << "dllm-client: load: none of " << report.requests << " calls succeeded\n";
    return 1;
  }
  return 0;
}

int Main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || args[0] == "help") {
    std::cout << ClientUsage();
    return args.empty() ? 2 : 0;
  }
  absl::StatusOr<ClientOptions> options = ParseClientOptions(args);
  if (!options.ok()) {
    std::cerr << "dllm-client: " << options.status().message() << "\n" << ClientUsage();
    return 2;
  }
  // `dllm-client load --help` asks for help too: usage on stdout, exit 0 (not a usage error).
  // Only flags before a "--" separator count (a prompt may well contain "-h").
  if (options->help) {
    std::cout << ClientUsage();
    return 0;
  }
  absl::StatusOr<Connection> connection = Connection::Open(*options);
  if (!connection.ok()) return Fail(connection.status(), 2);
  const std::string& cmd = options->command;
  if (cmd == "generate") return Generate(*options, *connection);
  if (cmd == "stream") return Stream(*options, *connection);
  if (cmd == "tokenize") return Tokenize(*options, *connection);
  if (cmd == "info") return Info(*options, *connection);
  if (cmd == "health") return Health(*options, *connection);
  if (cmd == "services") return Services(*options, *connection);
  return Load(*options, *connection);
}

}  // namespace
}  // namespace dllm::client

int main(int argc, char** argv) { return dllm::client::Main(argc, argv); }
