// Drives DiffusionService and its Gateway over a real gRPC channel on loopback against the
// real engine over a scripted model (tests/support/scripted_engine.h).
#include "server/grpc/diffusion_service.h"

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <prometheus/text_serializer.h>

#include <catch2/catch.hpp>
#include <map>
#include <sstream>
#include <thread>

#include "tests/support/grpc_harness.h"

namespace dllm {
namespace {

using Harness = testing::GrpcHarness;
using testing::ScriptedEngineOptions;
using testing::ScriptedText;

ScriptedEngineOptions StepTime(absl::Duration step) { return {.step_time = step}; }

v1::GenerateRequest Prompt(const std::string& text, int tokens) {
  v1::GenerateRequest r;
  r.set_prompt(text);
  r.set_max_new_tokens(tokens);
  return r;
}

TEST_CASE("service: unary Generate returns the engine's answer and stats") {
  Harness h;
  grpc::ClientContext context;
  v1::GenerateRequest request = Prompt("abc", 5);
  request.set_request_id("my-id");
  request.mutable_cache()->set_entropy_threshold(0.5f);
  v1::GenerateResponse response;
  grpc::Status status = h.stub().Generate(&context, request, &response);
  REQUIRE(status.ok());
  CHECK(response.request_id() == "my-id");
  CHECK(response.text() == ScriptedText(3, 5));
  CHECK(response.token_ids_size() == 5);
  CHECK(response.finish_reason() == v1::FINISH_REASON_LENGTH);
  CHECK(response.usage().prompt_tokens() == 3);
  CHECK(response.usage().generated_tokens() == 5);
  CHECK(response.cache_stats().steps() == 5);
  // EntropyCache (the default policy) at τ 0.5: step 0 is full (nothing cached); step s + 1 is full
  // when the token committed at step s (position 3 + s) had entropy 1.0, i.e. s even.
  CHECK(response.cache_stats().full_steps() == 3);
  CHECK(response.cache_stats().refresh_ratio() == Approx(0.6));
  // The server tokenized the prompt once and handed ids to the engine, no deadline set.
  const auto submitted = h.engine().submitted();
  REQUIRE(submitted.size() == 1);
  CHECK(submitted[0].prompt_ids == std::vector<int32_t>{testing::ByteToken('a'),
                                                        testing::ByteToken('b'),
                                                        testing::ByteToken('c')});
  CHECK_FALSE(submitted[0].prompt_text.has_value());
  CHECK(submitted[0].deadline == absl::InfiniteFuture());
  CHECK(h.RequestsWithStatus("OK") == 1);
  CHECK_THAT(h.log(),
             Catch::Contains("\"event\":\"request_done\"") && Catch::Contains("\"id\":\"my-id\"") &&
                 Catch::Contains("\"status\":\"OK\"") && Catch::Contains("\"refresh_ratio\":0.6"));
}

TEST_CASE("service: stream deltas concatenate to the final text; snapshots arrive") {
  Harness h;
  grpc::ClientContext context;
  v1::GenerateRequest request = Prompt("hi", 8);
  request.mutable_stream()->set_canvas_every_steps(2);
  auto reader = h.stub().GenerateStream(&context, request);
  v1::GenerateStreamResponse message;
  std::string committed;
  int deltas = 0, snapshots = 0, finals = 0;
  std::string final_text;
  while (reader->Read(&message)) {
    CHECK(finals == 0);  // the summary is the last message
    if (message.has_committed()) {
      committed += message.committed().text();
      ++deltas;
    } else if (message.has_canvas()) {
      CHECK_THAT(message.canvas().text(), Catch::StartsWith(committed.substr(0, 2)));
      ++snapshots;
    } else if (message.has_final()) {
      final_text = message.final().text();
      ++finals;
    }
  }
  REQUIRE(reader->Finish().ok());
  CHECK(deltas == 8);
  CHECK(snapshots >= 1);  // best effort, but this client keeps up
  CHECK(finals == 1);
  CHECK(committed == ScriptedText(2, 8));
  CHECK(final_text == committed);
}

TEST_CASE("service: client cancellation mid-stream reaches the engine") {
  Harness h(ServerConfig{}, StepTime(absl::Milliseconds(20)));
  grpc::ClientContext context;
  auto reader = h.stub().GenerateStream(&context, Prompt("x", 192));
  v1::GenerateStreamResponse message;
  REQUIRE(reader->Read(&message));
  context.TryCancel();
  while (reader->Read(&message)) {
  }
  CHECK(reader->Finish().error_code() == grpc::StatusCode::CANCELLED);
  // The engine saw Cancel and ended the request long before 200 steps.
  for (int i = 0; i < 200 && h.engine().active() > 0; ++i) absl::SleepFor(absl::Milliseconds(10));
  CHECK(h.engine().active() == 0);
  CHECK(h.engine().cancel_calls() >= 1);
  for (int i = 0; i < 100 && h.RequestsWithStatus("CANCELLED") < 1; ++i) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  CHECK(h.RequestsWithStatus("CANCELLED") == 1);
}

TEST_CASE("service: the call deadline is passed to the engine") {
  Harness h(ServerConfig{}, StepTime(absl::Milliseconds(20)));
  grpc::ClientContext context;
  const auto deadline = std::chrono::system_clock::now() + std::chrono::milliseconds(300);
  context.set_deadline(deadline);
  v1::GenerateResponse response;
  grpc::Status status = h.stub().Generate(&context, Prompt("x", 512), &response);
  CHECK(status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED);
  const auto submitted = h.engine().submitted();
  REQUIRE(submitted.size() == 1);
  // Same instant up to clock conversion and transport rounding.
  CHECK(absl::AbsDuration(submitted[0].deadline - absl::FromChrono(deadline)) <
        absl::Milliseconds(50));
  for (int i = 0; i < 200 && h.engine().active() > 0; ++i) absl::SleepFor(absl::Milliseconds(10));
  CHECK(h.engine().active() == 0);
}

TEST_CASE("service: bad requests are INVALID_ARGUMENT naming the field") {
  ServerConfig config;
  config.limits.max_new_tokens = 16;
  config.decoding.max_new_tokens = 8;
  config.limits.max_prompt_tokens = 4;
  Harness h(config);
  auto call = [&](const v1::GenerateRequest& r) {
    grpc::ClientContext context;
    v1::GenerateResponse response;
    return h.stub().Generate(&context, r, &response);
  };
  grpc::Status st = call(Prompt("x", 17));
  CHECK(st.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK_THAT(st.error_message(), Catch::Contains("limits.max_new_tokens (16)"));
  st = call(Prompt("too long prompt", 4));
  CHECK(st.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK_THAT(st.error_message(), Catch::Contains("limits.max_prompt_tokens (4)"));
  st = call(v1::GenerateRequest());
  CHECK(st.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  // An empty message is a message (zero bytes): its error names the field, not its absence.
  CHECK_THAT(st.error_message(), !Catch::Contains("carried no message"));
  // Streaming uses the same validation.
  grpc::ClientContext context;
  auto reader = h.stub().GenerateStream(&context, Prompt("x", 17));
  v1::GenerateStreamResponse message;
  CHECK_FALSE(reader->Read(&message));
  CHECK(reader->Finish().error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK(h.engine().submitted().empty());
  CHECK(h.RequestsWithStatus("INVALID_ARGUMENT") == 4);
}

// A unary call that half-closes without its message (what gRPC hands the server when a
// client gives up before sending it), with the given deadline (none when infinite).
grpc::Status CallWithoutMessage(Harness& h, absl::Duration timeout) {
  grpc::GenericStub generic(h.channel());
  grpc::ClientContext context;
  if (timeout != absl::InfiniteDuration()) {
    context.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  }
  grpc::CompletionQueue cq;
  std::unique_ptr<grpc::GenericClientAsyncReaderWriter> call =
      generic.PrepareCall(&context, "/dllm.v1.DiffusionLM/Generate", &cq);
  void* tag = nullptr;
  bool ok = false;
  auto wait = [&](int want) {
    REQUIRE(cq.Next(&tag, &ok));
    REQUIRE(reinterpret_cast<intptr_t>(tag) == want);
  };
  call->StartCall(reinterpret_cast<void*>(1));
  wait(1);
  call->WritesDone(reinterpret_cast<void*>(2));
  wait(2);
  grpc::Status status;
  call->Finish(&status, reinterpret_cast<void*>(3));
  wait(3);
  cq.Shutdown();
  while (cq.Next(&tag, &ok)) {
  }
  return status;
}

TEST_CASE("service: a call without its message is refused, or counted as its deadline") {
  Harness h;
  // No deadline: the client is still there and is told what is wrong.
  grpc::Status st = CallWithoutMessage(h, absl::InfiniteDuration());
  CHECK(st.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK_THAT(st.error_message(), Catch::Contains("carried no message"));
  CHECK(h.RequestsWithStatus("INVALID_ARGUMENT") == 1);
  // Within the slack of its deadline: a client that gave up before sending the message, and
  // counted as what it saw (a storm of 50 ms calls counted 4 of ~10,000 as INVALID_ARGUMENT).
  st = CallWithoutMessage(h, EngineRequestLink::kDeadlineSlack / 2);
  CHECK(st.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED);
  CHECK(h.RequestsWithStatus("DEADLINE_EXCEEDED") == 1);
  CHECK(h.RequestsWithStatus("INVALID_ARGUMENT") == 1);
  CHECK(h.engine().submitted().empty());
}

TEST_CASE("service: bearer tokens are enforced") {
  ServerConfig config;
  config.auth.tokens_env = "TEST_TOKENS";
  Harness h(config);
  auto call = [&](const char* header) {
    grpc::ClientContext context;
    if (header != nullptr) context.AddMetadata("authorization", header);
    v1::GenerateResponse response;
    return h.stub().Generate(&context, Prompt("x", 2), &response);
  };
  CHECK(call(nullptr).error_code() == grpc::StatusCode::UNAUTHENTICATED);
  CHECK(call("Bearer wrong").error_code() == grpc::StatusCode::UNAUTHENTICATED);
  CHECK(call("Bearer secret2").ok());
  grpc::ClientContext context;
  v1::GetModelInfoResponse info;
  CHECK(h.stub().GetModelInfo(&context, {}, &info).error_code() ==
        grpc::StatusCode::UNAUTHENTICATED);
  CHECK(h.RequestsWithStatus("UNAUTHENTICATED") == 2);
}

TEST_CASE("service: a full engine queue is RESOURCE_EXHAUSTED") {
  // One sequence runs, one waits: a third request finds the queue full.
  Harness h(ServerConfig{},
            {.queue_capacity = 1, .max_batch_sequences = 1, .step_time = absl::Milliseconds(20)});
  grpc::ClientContext running_context, waiting_context;
  auto running = h.stub().GenerateStream(&running_context, Prompt("x", 96));
  v1::GenerateStreamResponse message;
  REQUIRE(running->Read(&message));  // the first request holds the only batch slot
  auto waiting = h.stub().GenerateStream(&waiting_context, Prompt("y", 96));
  for (int i = 0; i < 500 && h.engine().submitted().size() < 2; ++i) {
    absl::SleepFor(absl::Milliseconds(2));
  }
  REQUIRE(h.engine().submitted().size() == 2);  // the second one waits in the queue
  grpc::ClientContext context;
  v1::GenerateResponse response;
  grpc::Status st = h.stub().Generate(&context, Prompt("z", 2), &response);
  CHECK(st.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED);
  CHECK_THAT(st.error_message(), Catch::Contains("queue is full"));
  running_context.TryCancel();
  waiting_context.TryCancel();
  while (running->Read(&message)) {
  }
  running->Finish();
  while (waiting->Read(&message)) {
  }
  waiting->Finish();
}

TEST_CASE("service: n choices end on their own; the call fails only when all do") {
  // Seed 8 fails: of a request at seed 7 with n = 3, choice 1.
  Harness h(ServerConfig{}, {.failing_seeds = {8}});
  v1::GenerateRequest request = Prompt("abc", 5);
  request.mutable_decoding()->set_seed(7);
  request.set_n(3);
  {
    grpc::ClientContext context;
    v1::GenerateResponse response;
    REQUIRE(h.stub().Generate(&context, request, &response).ok());
    REQUIRE(response.choices_size() == 3);
    CHECK(response.text().empty());
    for (int i : {0, 2}) {
      const v1::GenerateResponse& choice = response.choices(i);
      CHECK(choice.index() == i);
      CHECK_FALSE(choice.has_error());
      CHECK(choice.text() == ScriptedText(3, 5));
    }
    const v1::GenerateResponse& failed = response.choices(1);
    CHECK(failed.index() == 1);
    CHECK(failed.error().code() == static_cast<int>(grpc::StatusCode::INTERNAL));
    CHECK(failed.error().message() == "scripted failure");
    CHECK(failed.text().empty());
    CHECK(response.usage().prompt_tokens() == 3);
    CHECK(response.usage().generated_tokens() == 10);  // the two that succeeded
  }
  {
    grpc::ClientContext context;
    auto stream = h.stub().GenerateStream(&context, request);
    v1::GenerateStreamResponse message;
    std::map<int, std::string> text;
    std::map<int, v1::GenerateResponse> finals;
    while (stream->Read(&message)) {
      if (message.has_committed()) text[message.choice_index()] += message.committed().text();
      if (message.has_final()) finals[message.choice_index()] = message.final();
    }
    REQUIRE(stream->Finish().ok());
    REQUIRE(finals.size() == 3);
    CHECK(text[0] == ScriptedText(3, 5));
    CHECK(text[2] == ScriptedText(3, 5));
    CHECK(finals[0].text() == ScriptedText(3, 5));
    CHECK(finals[1].error().message() == "scripted failure");
    CHECK(finals[2].index() == 2);
  }
  // Every choice failing fails the call, with the first choice's status.
  request.mutable_decoding()->set_seed(8);
  request.set_n(1);
  grpc::ClientContext context;
  v1::GenerateResponse response;
  const grpc::Status st = h.stub().Generate(&context, request, &response);
  CHECK(st.error_code() == grpc::StatusCode::INTERNAL);
  CHECK(st.error_message() == "scripted failure");
  // Each choice counted on its own: 2 + 2 OK, 1 + 1 + 1 INTERNAL.
  CHECK(h.RequestsWithStatus("OK") == 4);
  CHECK(h.RequestsWithStatus("INTERNAL") == 3);
}

TEST_CASE("service: UNAVAILABLE while loading and while draining") {
  Harness h(ServerConfig{}, {}, /*attach=*/false);
  {
    grpc::ClientContext context;
    v1::GenerateResponse response;
    grpc::Status st = h.stub().Generate(&context, Prompt("x", 2), &response);
    CHECK(st.error_code() == grpc::StatusCode::UNAVAILABLE);
    CHECK_THAT(st.error_message(), Catch::Contains("loading"));
  }
  REQUIRE(h.gateway().AttachEngine(&h.engine()).ok());
  {
    grpc::ClientContext context;
    v1::GenerateResponse response;
    CHECK(h.stub().Generate(&context, Prompt("x", 2), &response).ok());
  }
  h.gateway().SetDraining();
  grpc::ClientContext context;
  v1::GenerateResponse response;
  grpc::Status st = h.stub().Generate(&context, Prompt("x", 2), &response);
  CHECK(st.error_code() == grpc::StatusCode::UNAVAILABLE);
  CHECK_THAT(st.error_message(), Catch::Contains("shutting down"));
}

TEST_CASE("service: drain lets in-flight requests finish; timed-out ones end UNAVAILABLE") {
  Harness h(ServerConfig{}, StepTime(absl::Milliseconds(5)));
  grpc::Status short_status, long_status;
  std::thread short_call([&] {
    grpc::ClientContext context;
    v1::GenerateResponse response;
    short_status = h.stub().Generate(&context, Prompt("x", 20), &response);
  });
  std::thread long_call([&] {
    grpc::ClientContext context;
    v1::GenerateResponse response;
    long_status = h.stub().Generate(&context, Prompt("x", 384), &response);
  });
  for (int i = 0; i < 500 && h.engine().active() < 2; ++i) absl::SleepFor(absl::Milliseconds(2));
  h.gateway().SetDraining();
  h.engine().Drain(absl::Milliseconds(500));
  short_call.join();
  long_call.join();
  CHECK(short_status.ok());
  CHECK(long_status.error_code() == grpc::StatusCode::UNAVAILABLE);
}

TEST_CASE("service: Tokenize and GetModelInfo") {
  ServerConfig config;
  REQUIRE(config.decoding.fields.SetTo("decoding.block_length", 8).ok());
  config.limits.max_steps = 77;
  Harness h(config);
  grpc::ClientContext context;
  v1::TokenizeRequest request;
  request.set_prompt("ab");
  v1::TokenizeResponse response;
  REQUIRE(h.stub().Tokenize(&context, request, &response).ok());
  CHECK(response.token_ids_size() == 2);
  CHECK(response.token_bytes(1) == "b");
  CHECK(response.rendered() == "ab");

  grpc::ClientContext info_context;
  v1::GetModelInfoResponse info;
  REQUIRE(h.stub().GetModelInfo(&info_context, {}, &info).ok());
  CHECK(info.family() == "llada");
  CHECK(info.vocab_size() == testing::kFakeVocab);
  CHECK(info.backend() == "cpu");
  CHECK(info.default_decoding().block_length() == 8);                // config over model default
  CHECK(info.default_cache().policy() == v1::CACHE_POLICY_ENTROPY);  // model default
  CHECK(info.limits().max_steps() == 77);
  CHECK(info.limits().max_shadow_sample_rate() == 0.1f);  // default bound
}

}  // namespace
}  // namespace dllm

namespace dllm {
namespace {

TEST_CASE("service: model defaults that violate the limits are refused at attach time") {
  ServerConfig config;
  config.limits.max_block_length = 16;  // LLaDA's default block is 32
  Harness h(config, {}, /*attach=*/false);
  const absl::Status st = h.gateway().AttachEngine(&h.engine());
  CHECK(st.code() == absl::StatusCode::kFailedPrecondition);
  CHECK_THAT(std::string(st.message()), Catch::Contains("decoding.block_length"));
}

}  // namespace
}  // namespace dllm
