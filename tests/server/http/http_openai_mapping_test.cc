#include "server/http/http_openai_mapping.h"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "server/http/http_status_mapping.h"
#include "server/request_mapping.h"

namespace dllm {
namespace {

using nlohmann::json;

OpenAiRequest Parse(OpenAiEndpoint endpoint, const json& body) {
  absl::StatusOr<OpenAiRequest> r = ParseOpenAiRequest(endpoint, body.dump());
  INFO(r.status().message());
  REQUIRE(r.ok());
  return *std::move(r);
}

std::string ErrorOf(const json& body, OpenAiEndpoint endpoint = OpenAiEndpoint::kChatCompletions) {
  absl::StatusOr<OpenAiRequest> r = ParseOpenAiRequest(endpoint, body.dump());
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == absl::StatusCode::kInvalidArgument);
  return std::string(r.status().message());
}

const json kChat = {{"model", "m"}, {"messages", {{{"role", "user"}, {"content", "hi"}}}}};

TEST_CASE("http mapping: chat request maps to the proto the gRPC API receives") {
  json body = kChat;
  body["messages"] = {
      {{"role", "system"}, {"content", "be brief"}},
      {{"role", "user"},
       {"content", {{{"type", "text"}, {"text", "a"}}, {{"type", "text"}, {"text", "b"}}}}}};
  body["max_tokens"] = 32;
  body["temperature"] = 0.5;
  body["top_p"] = 0.9;
  body["seed"] = 7;
  body["n"] = 1;
  body["stream"] = true;
  body["stream_options"] = {{"include_usage", true}};
  body["stop"] = nullptr;
  body["decoding"] = {{"schedule", "block"},
                      {"remasking", "REMASKING_RANDOM"},
                      {"steps", 8},
                      {"block_length", 16},
                      {"confidence_threshold", 0.9}};
  body["cache"] = {{"policy", "dual"}, {"recent_k", 4}};
  const OpenAiRequest r = Parse(OpenAiEndpoint::kChatCompletions, body);
  CHECK(r.model == "m");
  CHECK(r.stream);
  const v1::GenerateRequest& g = r.request;
  REQUIRE(g.chat().messages_size() == 2);
  CHECK(g.chat().messages(0).role() == "system");
  CHECK(g.chat().messages(1).content() == "ab");
  CHECK(g.max_new_tokens() == 32);
  CHECK(g.decoding().temperature() == 0.5f);
  CHECK(g.decoding().top_p() == 0.9f);
  CHECK(g.decoding().seed() == 7);
  CHECK(g.decoding().schedule() == v1::SCHEDULE_BLOCK);
  CHECK(g.decoding().remasking() == v1::REMASKING_RANDOM);
  CHECK(g.decoding().steps() == 8);
  CHECK(g.decoding().block_length() == 16);
  CHECK(g.decoding().confidence_threshold() == 0.9f);
  CHECK(g.cache().policy() == v1::CACHE_POLICY_DUAL);
  CHECK(g.cache().recent_k() == 4);
  CHECK_FALSE(g.cache().has_entropy_threshold());
  CHECK_FALSE(g.decoding().has_top_k());
}

TEST_CASE("http mapping: every cache policy by its name and its proto name") {
  for (CachePolicyKind kind : kAllCachePolicies) {
    const std::string name = Name(kind);
    INFO(name);
    for (const std::string& spelling : {name, "CACHE_POLICY_" + absl::AsciiStrToUpper(name)}) {
      json body = kChat;
      body["cache"] = {{"policy", spelling}};
      CHECK(Parse(OpenAiEndpoint::kChatCompletions, body).request.cache().policy() ==
            ToProto(kind));
    }
  }
  json body = kChat;
  body["cache"] = {{"policy", "prefx"}};
  CHECK(ErrorOf(body) ==
        "cache.policy: unknown value 'prefx' (expected "
        "none|entropy|dual|interval|prefix|d2cache|elastic)");
}

TEST_CASE("http mapping: completions prompt forms") {
  json body = {{"model", "m"}, {"prompt", "hello"}, {"max_completion_tokens", 5}};
  OpenAiRequest r = Parse(OpenAiEndpoint::kCompletions, body);
  CHECK(r.request.prompt() == "hello");
  CHECK(r.request.max_new_tokens() == 5);
  body["prompt"] = {"one"};
  CHECK(Parse(OpenAiEndpoint::kCompletions, body).request.prompt() == "one");
  body["prompt"] = {1, 2, 3};
  r = Parse(OpenAiEndpoint::kCompletions, body);
  REQUIRE(r.request.token_ids().ids_size() == 3);
  CHECK(r.request.token_ids().ids(2) == 3);
  body["prompt"] = {"a", "b"};
  CHECK(ErrorOf(body, OpenAiEndpoint::kCompletions).rfind("prompt:", 0) == 0);
  // A chat field on the completions endpoint is unknown there.
  CHECK(ErrorOf({{"model", "m"}, {"prompt", "x"}, {"messages", json::array()}},
                OpenAiEndpoint::kCompletions)
            .rfind("messages: unknown field", 0) == 0);
}

TEST_CASE("http mapping: shape errors name the field") {
  CHECK(ErrorOf(json::array()).rfind("body:", 0) == 0);
  CHECK(ErrorOf({{"messages", kChat["messages"]}}) == "model: is required");
  CHECK(ErrorOf({{"model", "m"}}) == "messages: is required");
  json b = kChat;
  b["wat"] = 1;
  CHECK(ErrorOf(b) == "wat: unknown field");
  b = kChat;
  b["n"] = 0;
  CHECK(ErrorOf(b) == "n: 0 is not a number of choices (>= 1)");
  b["n"] = 3;
  CHECK(Parse(OpenAiEndpoint::kChatCompletions, b).n == 3);
  b = kChat;
  b["temperature"] = "warm";
  CHECK(ErrorOf(b).rfind("temperature: must be a number", 0) == 0);
  b = kChat;
  b["max_tokens"] = 5000000000LL;
  CHECK(ErrorOf(b).rfind("max_tokens: 5000000000 is out of range", 0) == 0);
  b = kChat;
  b["max_tokens"] = 4;
  b["max_completion_tokens"] = 5;
  CHECK_THAT(ErrorOf(b), Catch::Contains("max_tokens and max_completion_tokens disagree"));
  b["max_completion_tokens"] = 4;  // equal values are fine
  CHECK(ParseOpenAiRequest(OpenAiEndpoint::kChatCompletions, b.dump()).ok());
  b = kChat;
  b["seed"] = -1;
  CHECK(ErrorOf(b).rfind("seed:", 0) == 0);
  b = kChat;
  b["stop"] = {"a", "b", "c", "d", "e"};
  CHECK(ErrorOf(b).rfind("stop:", 0) == 0);
  b["stop"] = {"a", 3};
  CHECK(ErrorOf(b).rfind("stop[1]: must be a string", 0) == 0);
  b["stop"] = std::string(300, 'x');
  CHECK(ErrorOf(b).rfind("stop[0]: longer than 256 bytes", 0) == 0);
  b["stop"] = "\n";
  CHECK(Parse(OpenAiEndpoint::kChatCompletions, b).stop == std::vector<std::string>{"\n"});
  b["stop"] = {"x", "", "yz"};
  CHECK(Parse(OpenAiEndpoint::kChatCompletions, b).stop == std::vector<std::string>{"x", "yz"});
  b = kChat;
  b["logprobs"] = 3;  // chat takes a boolean
  CHECK(ErrorOf(b).rfind("logprobs: must be a boolean", 0) == 0);
  b["logprobs"] = false;
  b["top_logprobs"] = 2;
  CHECK(ErrorOf(b) == "top_logprobs: needs \"logprobs\": true");
  b = {{"model", "m"}, {"prompt", "p"}, {"logprobs", true}};  // completions take a count
  CHECK(ErrorOf(b, OpenAiEndpoint::kCompletions).rfind("logprobs: must be an integer", 0) == 0);
  b["logprobs"] = 2;
  b["top_logprobs"] = 2;
  CHECK(ErrorOf(b, OpenAiEndpoint::kCompletions).rfind("top_logprobs: unknown field", 0) == 0);
  b = kChat;
  b["decoding"] = {{"stepz", 3}};
  CHECK(ErrorOf(b) == "decoding.stepz: unknown field");
  b["decoding"] = {{"schedule", "zigzag"}};
  CHECK(ErrorOf(b).rfind("decoding.schedule: unknown value 'zigzag'", 0) == 0);
  b = kChat;
  b["cache"] = {{"policy", 3}};
  CHECK(ErrorOf(b).rfind("cache.policy: must be a string", 0) == 0);
  b = kChat;
  b["messages"] = {{{"role", "user"}, {"content", "x"}, {"tool_calls", json::array()}}};
  CHECK(ErrorOf(b) == "messages[0].tool_calls: unknown field");
  b["messages"] = {{{"content", "x"}}};
  CHECK(ErrorOf(b) == "messages[0].role: is required");
  b["messages"] = {{{"role", "user"}, {"content", {{{"type", "image_url"}}}}}};
  CHECK(ErrorOf(b).rfind("messages[0].content[0]:", 0) == 0);
  CHECK_FALSE(ParseOpenAiRequest(OpenAiEndpoint::kChatCompletions, "{\"model\":").ok());
}

TEST_CASE("http mapping: request_mapping errors are renamed to the client's field") {
  json b = kChat;
  b["max_tokens"] = 0;
  b["temperature"] = 9;
  const OpenAiRequest r = Parse(OpenAiEndpoint::kChatCompletions, b);
  auto renamed = [&](const char* message) {
    return std::string(RenameFieldInError(absl::InvalidArgumentError(message), r).message());
  };
  CHECK(renamed("max_new_tokens: 0 is outside [1, 512]") == "max_tokens: 0 is outside [1, 512]");
  CHECK(renamed("decoding.temperature: 9 exceeds limits.max_temperature (2)") ==
        "temperature: 9 exceeds limits.max_temperature (2)");
  CHECK(renamed("chat.messages[0].role: 'x' is not system|user|assistant") ==
        "messages[0].role: 'x' is not system|user|assistant");
  CHECK(renamed("decoding.steps: 5000 exceeds limits.max_steps (1024)") ==
        "decoding.steps: 5000 exceeds limits.max_steps (1024)");
  // Not a field the client set: unchanged (top_p came from the decoding object, not top-level).
  CHECK(renamed("decoding.top_p: 0 is outside (0, 1]") == "decoding.top_p: 0 is outside (0, 1]");
  const absl::Status other = absl::ResourceExhaustedError("max_new_tokens: queue");
  CHECK(RenameFieldInError(other, r) == other);
}

TEST_CASE("http mapping: responses in the OpenAI shapes") {
  OpenAiRequest chat = Parse(OpenAiEndpoint::kChatCompletions, kChat);
  v1::GenerateResponse g;
  g.set_text("42");
  g.set_finish_reason(v1::FINISH_REASON_EOS);
  g.mutable_usage()->set_prompt_tokens(10);
  g.mutable_usage()->set_generated_tokens(3);
  g.mutable_cache_stats()->set_steps(8);
  g.mutable_cache_stats()->set_full_steps(2);
  g.mutable_cache_stats()->set_rows_computed(123);
  const json unary = CompletionResponseJson(chat, "chatcmpl-1", 1700000000, g);
  CHECK(unary["object"] == "chat.completion");
  CHECK(unary["id"] == "chatcmpl-1");
  CHECK(unary["model"] == "m");
  CHECK(unary["created"] == 1700000000);
  CHECK(unary["choices"][0]["message"] == json({{"role", "assistant"}, {"content", "42"}}));
  CHECK(unary["choices"][0]["finish_reason"] == "stop");
  CHECK(unary["usage"] ==
        json({{"prompt_tokens", 10}, {"completion_tokens", 3}, {"total_tokens", 13}}));
  CHECK(unary["cache_stats"]["steps"] == 8);
  CHECK(unary["cache_stats"]["rows_computed"] == 123);
  CHECK(unary["cache_stats"]["tau_switch_step"].is_null());  // never switched
  g.mutable_cache_stats()->set_tau_switch_step(5);
  CHECK(CompletionResponseJson(chat, "chatcmpl-1", 1700000000,
                               g)["cache_stats"]["tau_switch_step"] == 5);

  const json first = DeltaChunkJson(chat, "chatcmpl-1", 1, "", true);
  CHECK(first["object"] == "chat.completion.chunk");
  CHECK(first["choices"][0]["delta"] == json({{"role", "assistant"}, {"content", ""}}));
  CHECK(first["choices"][0]["finish_reason"].is_null());
  CHECK(DeltaChunkJson(chat, "c", 1, "4", false)["choices"][0]["delta"] ==
        json({{"content", "4"}}));
  g.set_finish_reason(v1::FINISH_REASON_LENGTH);
  const json last = FinalChunkJson(chat, "c", 1, g);
  CHECK(last["choices"][0]["finish_reason"] == "length");
  CHECK(last["choices"][0]["delta"] == json::object());
  CHECK(last["usage"]["total_tokens"] == 13);

  OpenAiRequest legacy = Parse(OpenAiEndpoint::kCompletions, {{"model", "m"}, {"prompt", "p"}});
  CHECK(CompletionResponseJson(legacy, "cmpl-1", 1, g)["choices"][0]["text"] == "42");
  CHECK(CompletionResponseJson(legacy, "cmpl-1", 1, g)["object"] == "text_completion");
  CHECK(DeltaChunkJson(legacy, "c", 1, "x", false)["choices"][0]["text"] == "x");
  CHECK(ModelListJson("m", 5)["data"][0]["id"] == "m");
  // Invalid UTF-8 in generated text never makes serialization throw.
  CHECK(DumpJson(json("\xff")) == "\"\xef\xbf\xbd\"");
}

TEST_CASE("http mapping: logprobs requests map to GenerateRequest.logprobs") {
  CHECK_FALSE(Parse(OpenAiEndpoint::kChatCompletions, kChat).request.has_logprobs());
  json b = kChat;
  b["logprobs"] = false;
  CHECK_FALSE(Parse(OpenAiEndpoint::kChatCompletions, b).request.has_logprobs());
  b["logprobs"] = true;
  CHECK(Parse(OpenAiEndpoint::kChatCompletions, b).request.logprobs() == 0);
  b["top_logprobs"] = 7;
  CHECK(Parse(OpenAiEndpoint::kChatCompletions, b).request.logprobs() == 7);
  // top_logprobs first, logprobs after: the same.
  b = kChat;
  b["top_logprobs"] = 7;
  b["logprobs"] = true;
  CHECK(Parse(OpenAiEndpoint::kChatCompletions, b).request.logprobs() == 7);
  const json legacy = {{"model", "m"}, {"prompt", "p"}, {"logprobs", 4}};
  CHECK(Parse(OpenAiEndpoint::kCompletions, legacy).request.logprobs() == 4);
  // The range is request_mapping's (as on gRPC); its message names the client's field.
  b["top_logprobs"] = 21;
  const OpenAiRequest r = Parse(OpenAiEndpoint::kChatCompletions, b);
  CHECK(std::string(
            RenameFieldInError(absl::InvalidArgumentError("logprobs: 21 is outside [0, 20]"), r)
                .message()) == "top_logprobs: 21 is outside [0, 20]");
}

TEST_CASE("http mapping: logprobs in OpenAI's chat and completions shapes") {
  v1::GenerateResponse g;
  g.set_text("a\xc3\xa9!");  // "a", then "é" split over two tokens, then "!"
  g.set_finish_reason(v1::FINISH_REASON_EOS);
  auto add = [&](int id, std::string bytes, float logprob) {
    v1::TokenLogprob* t = g.add_logprobs();
    t->set_token_id(id);
    t->set_token_bytes(bytes);
    t->set_logprob(logprob);
    v1::TopLogprob* top = t->add_top_logprobs();
    top->set_token_id(id);
    top->set_token_bytes(bytes);
    top->set_logprob(logprob);
    top = t->add_top_logprobs();
    top->set_token_id(99);
    top->set_token_bytes("z");
    top->set_logprob(-5.0f);
  };
  add(1, "a", -0.25f);
  add(2, "\xc3", -0.5f);
  add(3, "\xa9", -1.0f);
  add(4, "!", -2.0f);
  json body = kChat;
  body["logprobs"] = true;
  body["top_logprobs"] = 2;
  const json chat =
      CompletionResponseJson(Parse(OpenAiEndpoint::kChatCompletions, body), "c", 1, g);
  const json& content = chat["choices"][0]["logprobs"]["content"];
  REQUIRE(content.size() == 4);
  CHECK(content[0]["token"] == "a");
  CHECK(content[0]["logprob"] == -0.25);
  CHECK(content[0]["bytes"] == json::array({97}));
  CHECK(content[1]["bytes"] == json::array({0xc3}));  // exact, though not a character
  CHECK(content[2]["bytes"] == json::array({0xa9}));
  CHECK(content[3]["top_logprobs"] ==
        json::array({{{"token", "!"}, {"logprob", -2.0}, {"bytes", json::array({33})}},
                     {{"token", "z"}, {"logprob", -5.0}, {"bytes", json::array({122})}}}));
  CHECK(chat["choices"][0]["logprobs"]["refusal"].is_null());
  // Serializable although tokens split a character.
  CHECK_NOTHROW(DumpJson(chat));

  const json legacy_body = {{"model", "m"}, {"prompt", "p"}, {"logprobs", 2}};
  const json legacy =
      CompletionResponseJson(Parse(OpenAiEndpoint::kCompletions, legacy_body), "c", 1, g);
  const json& lp = legacy["choices"][0]["logprobs"];
  CHECK(lp["token_logprobs"] == json::array({-0.25, -0.5, -1.0, -2.0}));
  CHECK(lp["text_offset"] == json::array({0, 1, 2, 3}));
  CHECK(lp["top_logprobs"][0] == json({{"a", -0.25}, {"z", -5.0}}));
  CHECK(lp["tokens"][3] == "!");

  // A stop string cut the text after "a\xc3\xa9": the tokens covering it are listed.
  g.set_text("a\xc3\xa9");
  CHECK(CompletionResponseJson(Parse(OpenAiEndpoint::kCompletions, legacy_body), "c", 1,
                               g)["choices"][0]["logprobs"]["tokens"]
            .size() == 3);
  // Not asked: null, as before.
  CHECK(CompletionResponseJson(Parse(OpenAiEndpoint::kChatCompletions, kChat), "c", 1,
                               g)["choices"][0]["logprobs"]
            .is_null());
}

TEST_CASE("http mapping: n choices, one of them failed") {
  json body = kChat;
  body["n"] = 3;
  const OpenAiRequest chat = Parse(OpenAiEndpoint::kChatCompletions, body);
  v1::GenerateResponse a, c;
  a.set_text("first");
  a.set_finish_reason(v1::FINISH_REASON_EOS);
  a.mutable_usage()->set_prompt_tokens(10);
  a.mutable_usage()->set_generated_tokens(3);
  a.mutable_cache_stats()->set_steps(7);
  c.set_text("third");
  c.set_finish_reason(v1::FINISH_REASON_LENGTH);
  c.mutable_usage()->set_prompt_tokens(10);
  c.mutable_usage()->set_generated_tokens(5);
  const std::vector<ChoiceOutcome> outcomes = {
      {absl::OkStatus(), &a},
      {absl::InternalError("step 4 produced a non-finite logit"), nullptr},
      {absl::OkStatus(), &c}};
  const json out = MultiChoiceResponseJson(chat, "chatcmpl-1", 5, outcomes);
  REQUIRE(out["choices"].size() == 3);
  for (int i = 0; i < 3; ++i) CHECK(out["choices"][i]["index"] == i);
  CHECK(out["choices"][0]["message"]["content"] == "first");
  CHECK(out["choices"][0]["finish_reason"] == "stop");
  CHECK(out["choices"][0]["cache_stats"]["steps"] == 7);
  CHECK(out["choices"][1]["finish_reason"].is_null());
  CHECK(out["choices"][1]["message"]["content"].is_null());
  CHECK(out["choices"][1]["error"]["type"] == "internal_error");
  CHECK(out["choices"][1]["error"]["message"] == "step 4 produced a non-finite logit");
  CHECK(out["choices"][2]["finish_reason"] == "length");
  // The prompt once, the completions summed.
  CHECK(out["usage"] ==
        json({{"prompt_tokens", 10}, {"completion_tokens", 8}, {"total_tokens", 18}}));
  CHECK(UsageChunkJson(chat, "c", 5, outcomes)["usage"] == out["usage"]);
  CHECK(UsageChunkJson(chat, "c", 5, outcomes)["choices"] == json::array());
  const json error_chunk =
      ChoiceErrorChunkJson(chat, "c", 5, 1, absl::DeadlineExceededError("deadline"));
  CHECK(error_chunk["choices"][0]["index"] == 1);
  CHECK(error_chunk["choices"][0]["finish_reason"].is_null());
  CHECK(error_chunk["choices"][0]["error"]["type"] == "timeout");

  const OpenAiRequest legacy =
      Parse(OpenAiEndpoint::kCompletions, {{"model", "m"}, {"prompt", "p"}, {"n", 3}});
  const json legacy_out = MultiChoiceResponseJson(legacy, "cmpl-1", 5, outcomes);
  CHECK(legacy_out["object"] == "text_completion");
  CHECK(legacy_out["choices"][2]["text"] == "third");
  CHECK(legacy_out["choices"][1]["text"].is_null());
}

TEST_CASE("http status mapping: codes, types and the error body") {
  CHECK(ToHttpError(absl::InvalidArgumentError("x")).status == 400);
  CHECK(ToHttpError(absl::UnauthenticatedError("x")).status == 401);
  CHECK(ToHttpError(absl::NotFoundError("x")).status == 404);
  CHECK(ToHttpError(absl::ResourceExhaustedError("queue full")).status == 429);
  CHECK(ToHttpError(absl::ResourceExhaustedError("x")).type == "rate_limit_error");
  CHECK(ToHttpError(absl::UnavailableError("draining")).status == 503);
  CHECK(ToHttpError(absl::DeadlineExceededError("x")).status == 504);
  CHECK(ToHttpError(absl::InternalError("x")).status == 500);
  CHECK(ToHttpError(absl::DataLossError("x")).status == 500);

  json body = json::parse(HttpErrorBody(absl::InvalidArgumentError("decoding.steps: too many")));
  CHECK(body["error"]["message"] == "decoding.steps: too many");
  CHECK(body["error"]["type"] == "invalid_request_error");
  CHECK(body["error"]["param"] == "decoding.steps");
  CHECK(body["error"]["code"] == "invalid_value");
  body = json::parse(HttpErrorBody(absl::InvalidArgumentError("messages[1].role: bad")));
  CHECK(body["error"]["param"] == "messages[1].role");
  body = json::parse(HttpErrorBody(absl::UnavailableError("server is shutting down")));
  CHECK(body["error"]["param"].is_null());
  CHECK(body["error"]["type"] == "service_unavailable");
  body = json::parse(HttpErrorBody(absl::UnauthenticatedError("missing bearer token: x")));
  CHECK(body["error"]["param"].is_null());  // "missing bearer token" is not a field path
  body = json::parse(HttpErrorBody("too big", "invalid_request_error", "payload_too_large"));
  CHECK(body["error"]["code"] == "payload_too_large");
}

}  // namespace
}  // namespace dllm

namespace dllm {
namespace {

TEST_CASE("http mapping: stream_options.include_steps opts into step events, with stream only") {
  json body = kChat;
  body["stream"] = true;
  CHECK_FALSE(Parse(OpenAiEndpoint::kChatCompletions, body).include_steps);
  body["stream_options"] = {{"include_steps", true}, {"include_usage", true}};
  CHECK(Parse(OpenAiEndpoint::kChatCompletions, body).include_steps);
  body["stream_options"] = {{"include_steps", false}};
  CHECK_FALSE(Parse(OpenAiEndpoint::kChatCompletions, body).include_steps);
  body["stream_options"] = {{"include_steps", "yes"}};
  CHECK(ErrorOf(body) == "stream_options.include_steps: must be a boolean");
  body["stream_options"] = {{"include_steps", true}};
  body["stream"] = false;
  CHECK(ErrorOf(body) == "stream_options.include_steps: needs \"stream\": true");
  body["stream_options"] = {{"include_canvas", true}};
  CHECK(ErrorOf(body) == "stream_options.include_canvas: unknown field");
}

}  // namespace
}  // namespace dllm

namespace dllm {
namespace {

// Every CacheOptions/DecodingOptions field of the proto has its HTTP name: the two
// transports accept the same values (shadow_sample_rate was refused as unknown over HTTP).
TEST_CASE("http mapping: decoding and cache objects take every proto field") {
  for (const auto* descriptor :
       {v1::DecodingOptions::descriptor(), v1::CacheOptions::descriptor()}) {
    const std::string object = descriptor == v1::CacheOptions::descriptor() ? "cache" : "decoding";
    for (int i = 0; i < descriptor->field_count(); ++i) {
      const auto* f = descriptor->field(i);
      INFO(object << "." << f->name());
      json value;
      if (f->type() == google::protobuf::FieldDescriptor::TYPE_ENUM) {
        value = f->enum_type()->value(1)->name();
      } else if (f->cpp_type() == google::protobuf::FieldDescriptor::CPPTYPE_FLOAT) {
        value = 0.05;
      } else {
        value = 3;
      }
      json body = kChat;
      body[object] = {{f->name(), value}};
      absl::StatusOr<OpenAiRequest> r =
          ParseOpenAiRequest(OpenAiEndpoint::kChatCompletions, body.dump());
      INFO(r.status().message());
      REQUIRE(r.ok());
      const google::protobuf::Message& options =
          object == "cache" ? static_cast<const google::protobuf::Message&>(r->request.cache())
                            : r->request.decoding();
      CHECK(options.GetReflection()->HasField(options, f));
    }
  }
  json body = kChat;
  body["cache"] = {{"shadow_sample_rate", 0.25}};
  CHECK(Parse(OpenAiEndpoint::kChatCompletions, body).request.cache().shadow_sample_rate() ==
        0.25f);
}

}  // namespace
}  // namespace dllm

namespace dllm {
namespace {

// A 4 MB body of nested arrays cost ~145 MB of DOM: the shape is bounded before parsing.
TEST_CASE("http mapping: deeply nested or huge JSON is refused before a DOM is built") {
  const std::string nested = std::string(2 << 20, '[') + std::string(2 << 20, ']');
  CHECK(ErrorOf(json::parse("{}"), OpenAiEndpoint::kChatCompletions) == "model: is required");
  absl::StatusOr<OpenAiRequest> r = ParseOpenAiRequest(OpenAiEndpoint::kChatCompletions, nested);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().message() ==
        absl::StrCat("body: JSON nested deeper than ", kMaxJsonDepth, " levels"));
  // At the bound: the parser decides (here: valid JSON, but not an object).
  const std::string at_bound = std::string(kMaxJsonDepth, '[') + std::string(kMaxJsonDepth, ']');
  r = ParseOpenAiRequest(OpenAiEndpoint::kChatCompletions, at_bound);
  CHECK(r.status().message() == "body: must be a JSON object");
  // A flat array of more values than the bound.
  std::string flat = R"({"model": "m", "prompt": [1)";
  for (int64_t i = 0; i < kMaxJsonValues; ++i) flat += ",1";
  flat += "]}";
  r = ParseOpenAiRequest(OpenAiEndpoint::kCompletions, flat);
  CHECK(r.status().message() == absl::StrCat("body: more than ", kMaxJsonValues, " JSON values"));
  // Brackets and commas inside strings are text, not structure.
  json body = kChat;
  body["messages"][0]["content"] = std::string(100000, '[') + "\\\"" + std::string(300000, ',');
  CHECK(Parse(OpenAiEndpoint::kChatCompletions, body).request.chat().messages(0).content().size() ==
        400002);
}

}  // namespace
}  // namespace dllm
