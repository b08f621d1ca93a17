// The Gateway's admission and call records, driven over a real loopback gRPC channel against
// the real engine over a scripted model: invalid UTF-8, oversized prompts and replies, expired
// calls, and a storm of rejected calls (the hostile probe's defects 4, 5, 6 and 10).
#include "server/gateway.h"

#include <grpcpp/grpcpp.h>
#include <prometheus/text_serializer.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <map>
#include <sstream>
#include <thread>

#include "server/grpc/diffusion_service.h"
#include "tests/support/grpc_harness.h"

namespace dllm {
namespace {

// Queue capacity 64, like the server's default.
class Harness : public testing::GrpcHarness {
 public:
  explicit Harness(ServerConfig config = {}, absl::Duration step = absl::Milliseconds(1))
      : GrpcHarness(std::move(config), {.step_time = step}) {}
  double Requests(const std::string& code) { return RequestsWithStatus(code); }
};

v1::GenerateRequest Prompt(const std::string& text, int tokens) {
  v1::GenerateRequest r;
  r.set_prompt(text);
  r.set_max_new_tokens(tokens);
  return r;
}

TEST_CASE("gateway: invalid UTF-8 is INVALID_ARGUMENT naming the field, logged, counted",
          "[reliability][utf8]") {
  Harness h;
  // The C++ client serializes invalid UTF-8 in a string field (it only logs), so the server
  // receives exactly what a hostile client would send.
  {
    grpc::ClientContext context;
    v1::GenerateResponse response;
    const grpc::Status status =
        h.stub().Generate(&context, Prompt("ok \xff\xfe bad", 4), &response);
    CHECK(status.error_code() == grpc::StatusCode::INVALID_ARGUMENT);  // was UNIMPLEMENTED, ""
    CHECK_THAT(status.error_message(), Catch::Contains("prompt") && Catch::Contains("UTF-8"));
  }
  {
    v1::GenerateRequest request;
    auto* m = request.mutable_chat()->add_messages();
    m->set_role("user");
    m->set_content("fine");
    m = request.mutable_chat()->add_messages();
    m->set_role("user");
    m->set_content("\xc0\xaf overlong slash");
    grpc::ClientContext context;
    auto reader = h.stub().GenerateStream(&context, request);
    v1::GenerateStreamResponse message;
    while (reader->Read(&message)) {
    }
    const grpc::Status status = reader->Finish();
    CHECK(status.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
    CHECK_THAT(status.error_message(), Catch::Contains("chat.messages[1].content"));
  }
  {
    v1::TokenizeRequest request;
    request.set_prompt("\xed\xa0\x80");  // a UTF-16 surrogate
    grpc::ClientContext context;
    v1::TokenizeResponse response;
    const grpc::Status status = h.stub().Tokenize(&context, request, &response);
    CHECK(status.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
    CHECK_THAT(status.error_message(), Catch::Contains("prompt"));
  }
  CHECK(h.WaitForRecorded(2) == 2);
  CHECK(h.Requests("INVALID_ARGUMENT") == 2);  // the two generation calls
  CHECK(h.LogLines("not valid UTF-8") == 2);
  // Valid multi-byte text still goes through.
  grpc::ClientContext context;
  v1::GenerateResponse response;
  CHECK(h.stub().Generate(&context, Prompt("héllo ✓ 😀", 3), &response).ok());
}

TEST_CASE("gateway: oversized prompts are refused before tokenizing", "[reliability]") {
  Harness h;  // limits.max_prompt_bytes unset: 2048 tokens * 32 bytes = 65536
  const std::string huge(1 << 20, 'a');
  {
    v1::TokenizeRequest request;
    request.set_prompt(huge);
    grpc::ClientContext context;
    v1::TokenizeResponse response;
    const grpc::Status status = h.stub().Tokenize(&context, request, &response);
    CHECK(status.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
    CHECK_THAT(status.error_message(),
               Catch::Contains("prompt") && Catch::Contains("limits.max_prompt_bytes (65536)"));
  }
  {
    grpc::ClientContext context;
    v1::GenerateResponse response;
    const grpc::Status status = h.stub().Generate(&context, Prompt(huge, 4), &response);
    CHECK(status.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
    CHECK_THAT(status.error_message(), Catch::Contains("limits.max_prompt_bytes"));
  }
  {
    v1::GenerateRequest request;
    auto* m = request.mutable_chat()->add_messages();
    m->set_role("user");
    m->set_content(huge);
    grpc::ClientContext context;
    v1::GenerateResponse response;
    const grpc::Status status = h.stub().Generate(&context, request, &response);
    CHECK(status.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
    CHECK_THAT(status.error_message(), Catch::Contains("chat.messages"));
  }
  CHECK(h.engine().tokenize_calls() == 0);
  // An explicit limit wins over the derived one.
  ServerConfig config;
  config.limits.max_prompt_bytes = 10;
  Harness small(config);
  v1::TokenizeRequest request;
  request.set_prompt("eleven byte");
  grpc::ClientContext context;
  v1::TokenizeResponse response;
  CHECK(small.stub().Tokenize(&context, request, &response).error_code() ==
        grpc::StatusCode::INVALID_ARGUMENT);
}

TEST_CASE("gateway: a reply over max_send_message_bytes is counted as what the client got",
          "[reliability]") {
  ServerConfig config;
  config.server.max_send_message_bytes = 1024;
  Harness h(config);
  // 512 one-byte tokens: the text alone is half the limit, the token ids the rest.
  {
    grpc::ClientContext context;
    v1::GenerateResponse response;
    const grpc::Status status = h.stub().Generate(&context, Prompt("x", 512), &response);
    CHECK(status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED);
    CHECK_THAT(status.error_message(), Catch::Contains("max_send_message_bytes"));
  }
  {
    grpc::ClientContext context;
    auto reader = h.stub().GenerateStream(&context, Prompt("x", 512));
    v1::GenerateStreamResponse message;
    std::string text;
    while (reader->Read(&message)) text += message.committed().text();
    const grpc::Status status = reader->Finish();
    CHECK(status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED);
    CHECK(text == testing::ScriptedText(1, 512));  // the deltas all arrived
  }
  CHECK(h.WaitForRecorded(2) == 2);
  CHECK(h.Requests("OK") == 0);  // was 2: logged and counted as OK
  CHECK(h.Requests("RESOURCE_EXHAUSTED") == 2);
  // Small replies are unaffected.
  grpc::ClientContext context;
  v1::GenerateResponse response;
  CHECK(h.stub().Generate(&context, Prompt("x", 3), &response).ok());
}

TEST_CASE("gateway: expired calls count as DEADLINE_EXCEEDED, once each",
          "[reliability][deadline]") {
  Harness h(ServerConfig{}, absl::Milliseconds(2));
  constexpr int kCalls = 16;
  std::atomic<int> client_deadline{0};
  std::vector<std::thread> threads;
  threads.reserve(kCalls);
  for (int i = 0; i < kCalls; ++i) {
    threads.emplace_back([&, i] {
      grpc::ClientContext context;
      context.set_deadline(std::chrono::system_clock::now() +
                           std::chrono::milliseconds(50 + 5 * i));
      if (i % 2 == 0) {
        v1::GenerateResponse response;
        const grpc::Status status = h.stub().Generate(&context, Prompt("x", 512), &response);
        client_deadline += status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED;
      } else {
        auto reader = h.stub().GenerateStream(&context, Prompt("x", 512));
        v1::GenerateStreamResponse message;
        while (reader->Read(&message)) {
        }
        client_deadline += reader->Finish().error_code() == grpc::StatusCode::DEADLINE_EXCEEDED;
      }
    });
  }
  for (auto& t : threads) t.join();
  CHECK(client_deadline.load() == kCalls);
  CHECK(h.WaitForRecorded(kCalls) == kCalls);
  CHECK(h.Requests("DEADLINE_EXCEEDED") == kCalls);
  CHECK(h.Requests("CANCELLED") == 0);  // was: most of them (the client's RST came first)
}

TEST_CASE("gateway: a storm of rejected calls is counted in full but logged sparingly",
          "[reliability]") {
  Harness h;
  constexpr int kCalls = 300;
  const absl::Time start = absl::Now();
  for (int i = 0; i < kCalls; ++i) {
    grpc::ClientContext context;
    v1::GenerateResponse response;
    v1::GenerateRequest request = Prompt("x", 4);
    request.mutable_decoding()->set_top_p(5);  // INVALID_ARGUMENT
    CHECK(h.stub().Generate(&context, request, &response).error_code() ==
          grpc::StatusCode::INVALID_ARGUMENT);
  }
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
  CHECK(h.Requests("INVALID_ARGUMENT") == kCalls);
  const int lines = h.LogLines("request_done");
  CHECK(lines >= 1);
  CHECK(lines <= Gateway::kRejectedLogLinesPerSecond * (static_cast<int>(seconds) + 2));
  if (seconds < 1.0) CHECK(lines < kCalls);
}

}  // namespace
}  // namespace dllm
