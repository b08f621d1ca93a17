#include "server/request_mapping.h"

#include <catch2/catch.hpp>
#include <limits>

namespace dllm {
namespace {

ModelInfo TestModel() {
  ModelInfo m;
  m.family = "llada";
  m.vocab_size = 1000;
  m.default_decoding.block_length = 32;
  m.default_decoding.steps = 0;
  m.default_cache.policy = CachePolicyKind::kEntropy;
  m.default_cache.recent_k = 16;
  return m;
}

v1::GenerateRequest Prompt(const std::string& text) {
  v1::GenerateRequest r;
  r.set_prompt(text);
  return r;
}

std::string ErrorOf(const v1::GenerateRequest& r, const LimitsSection& limits = {}) {
  const ModelInfo model = TestModel();
  absl::StatusOr<GenerationRequest> g =
      ToGenerationRequest(r, ResolveRequestDefaults(model, {}, {}), limits, model);
  REQUIRE_FALSE(g.ok());
  CHECK(g.status().code() == absl::StatusCode::kInvalidArgument);
  return std::string(g.status().message());
}

TEST_CASE("request mapping: request beats config beats model defaults") {
  const ModelInfo model = TestModel();
  DecodingDefaults config_decoding;
  config_decoding.max_new_tokens = 48;
  REQUIRE(config_decoding.fields.SetTo("decoding.block_length", 16).ok());
  REQUIRE(config_decoding.fields.SetTo("decoding.temperature", 0.5f).ok());
  CacheDefaults config_cache;
  REQUIRE(config_cache.fields.SetTo("cache.policy", CachePolicyKind::kInterval).ok());
  const RequestDefaults defaults = ResolveRequestDefaults(model, config_decoding, config_cache);

  v1::GenerateRequest r = Prompt("hi");
  r.mutable_decoding()->set_temperature(0.0f);  // explicitly set to the zero value
  r.mutable_decoding()->set_schedule(v1::SCHEDULE_WINDOW);
  r.mutable_cache()->set_recent_k(8);
  absl::StatusOr<GenerationRequest> g = ToGenerationRequest(r, defaults, LimitsSection{}, model);
  REQUIRE(g.ok());
  CHECK(g->prompt_text == "hi");
  CHECK(g->max_new_tokens == 48);                        // config
  CHECK(g->decoding.block_length == 16);                 // config
  CHECK(g->decoding.temperature == 0.0f);                // request (proto3 optional)
  CHECK(g->decoding.schedule == Schedule::kWindow);      // request
  CHECK(g->decoding.steps == 0);                         // model
  CHECK(g->cache.policy == CachePolicyKind::kInterval);  // config
  CHECK(g->cache.recent_k == 8);                         // request
  CHECK_FALSE(g->cache.shadow_sample_rate.has_value());  // unset: the engine's rate
  r.mutable_cache()->set_shadow_sample_rate(0.05f);
  g = ToGenerationRequest(r, defaults, LimitsSection{}, model);
  REQUIRE(g.ok());
  CHECK(g->cache.shadow_sample_rate == 0.05f);
}

TEST_CASE("request mapping: a request or config that sets tau alone pins it") {
  ModelInfo model = TestModel();
  model.default_cache.entropy_threshold = 1.0f;
  model.default_cache.entropy_threshold_under_load = 2.0f;  // the family's
  const RequestDefaults defaults = ResolveRequestDefaults(model, {}, {});
  v1::GenerateRequest r = Prompt("hi");
  absl::StatusOr<GenerationRequest> g = ToGenerationRequest(r, defaults, LimitsSection{}, model);
  REQUIRE(g.ok());
  CHECK(g->cache.entropy_threshold_under_load == 2.0f);  // left to the server: may switch
  r.mutable_cache()->set_entropy_threshold(0.5f);
  g = ToGenerationRequest(r, defaults, LimitsSection{}, model);
  REQUIRE(g.ok());
  CHECK(g->cache.entropy_threshold == 0.5f);
  CHECK_FALSE(g->cache.entropy_threshold_under_load.has_value());  // pinned: never switches
  r.mutable_cache()->set_entropy_threshold_under_load(3.0f);
  g = ToGenerationRequest(r, defaults, LimitsSection{}, model);
  REQUIRE(g.ok());
  CHECK(g->cache.entropy_threshold_under_load == 3.0f);

  // A config that sets tau alone pins it for every request that leaves tau to the server.
  CacheDefaults config_cache;
  REQUIRE(config_cache.fields.SetTo("cache.entropy_threshold", 0.75f).ok());
  g = ToGenerationRequest(Prompt("hi"), ResolveRequestDefaults(model, {}, config_cache),
                          LimitsSection{}, model);
  REQUIRE(g.ok());
  CHECK(g->cache.entropy_threshold == 0.75f);
  CHECK_FALSE(g->cache.entropy_threshold_under_load.has_value());
}

TEST_CASE("request mapping: inputs") {
  const ModelInfo model = TestModel();
  const RequestDefaults defaults = ResolveRequestDefaults(model, {}, {});
  v1::GenerateRequest chat;
  auto* m = chat.mutable_chat()->add_messages();
  m->set_role("user");
  m->set_content("hello");
  absl::StatusOr<GenerationRequest> g = ToGenerationRequest(chat, defaults, {}, model);
  REQUIRE(g.ok());
  REQUIRE(g->messages.size() == 1);
  CHECK(g->messages[0].content == "hello");

  v1::GenerateRequest ids;
  ids.mutable_token_ids()->add_ids(5);
  ids.mutable_token_ids()->add_ids(999);
  g = ToGenerationRequest(ids, defaults, {}, model);
  REQUIRE(g.ok());
  CHECK(g->prompt_ids == std::vector<int32_t>{5, 999});
}

TEST_CASE("request mapping: every bad field is named with its bound") {
  LimitsSection limits;
  limits.max_new_tokens = 100;
  limits.max_steps = 50;
  limits.max_block_length = 40;
  limits.max_window = 40;
  limits.max_temperature = 1.5f;
  limits.max_prompt_tokens = 3;
  limits.allowed_cache_policies = {CachePolicyKind::kNone, CachePolicyKind::kEntropy};

  CHECK_THAT(ErrorOf(v1::GenerateRequest()), Catch::Contains("input: one of prompt"));
  CHECK_THAT(ErrorOf(Prompt("")), Catch::Contains("prompt: must not be empty"));
  v1::GenerateRequest r = Prompt("x");
  r.set_max_new_tokens(101);
  CHECK_THAT(ErrorOf(r, limits),
             Catch::Contains("max_new_tokens: 101 exceeds limits.max_new_tokens (100)"));
  r.set_max_new_tokens(0);
  CHECK_THAT(ErrorOf(r, limits), Catch::Contains("max_new_tokens"));

  auto with = [](auto edit) {
    v1::GenerateRequest q = Prompt("x");
    edit(q);
    return q;
  };
  CHECK_THAT(ErrorOf(with([](auto& q) { q.mutable_decoding()->set_steps(51); }), limits),
             Catch::Contains("decoding.steps: 51 exceeds limits.max_steps (50)"));
  CHECK_THAT(ErrorOf(with([](auto& q) { q.mutable_decoding()->set_steps(-1); }), limits),
             Catch::Contains("decoding.steps"));
  CHECK_THAT(ErrorOf(with([](auto& q) { q.mutable_decoding()->set_block_length(41); }), limits),
             Catch::Contains("decoding.block_length: 41 exceeds limits.max_block_length (40)"));
  CHECK_THAT(ErrorOf(with([](auto& q) { q.mutable_decoding()->set_window(41); }), limits),
             Catch::Contains("decoding.window"));
  CHECK_THAT(
      ErrorOf(with([](auto& q) { q.mutable_decoding()->set_confidence_threshold(1.5f); }), limits),
      Catch::Contains("decoding.confidence_threshold"));
  CHECK_THAT(ErrorOf(with([](auto& q) { q.mutable_decoding()->set_temperature(2.0f); }), limits),
             Catch::Contains("decoding.temperature: 2 exceeds limits.max_temperature (1.5)"));
  CHECK_THAT(
      ErrorOf(with([](auto& q) {
                q.mutable_decoding()->set_temperature(std::numeric_limits<float>::quiet_NaN());
              }),
              limits),
      Catch::Contains("decoding.temperature"));
  CHECK_THAT(ErrorOf(with([](auto& q) { q.mutable_decoding()->set_top_k(1001); }), limits),
             Catch::Contains("decoding.top_k"));
  CHECK_THAT(ErrorOf(with([](auto& q) { q.mutable_decoding()->set_top_p(0.0f); }), limits),
             Catch::Contains("decoding.top_p"));
  CHECK_THAT(ErrorOf(with([](auto& q) { q.mutable_decoding()->set_eps(1.0f); }), limits),
             Catch::Contains("decoding.eps"));
  CHECK_THAT(ErrorOf(with([](auto& q) { q.mutable_decoding()->set_alg_temp(-1.0f); }), limits),
             Catch::Contains("decoding.alg_temp"));
  CHECK_THAT(ErrorOf(with([](auto& q) {
                       q.mutable_decoding()->set_schedule(static_cast<v1::Schedule>(42));
                     }),
                     limits),
             Catch::Contains("decoding.schedule"));
  CHECK_THAT(
      ErrorOf(with([](auto& q) { q.mutable_cache()->set_policy(v1::CACHE_POLICY_DUAL); }), limits),
      Catch::Contains("cache.policy: 'dual' is not in limits.allowed_cache_policies"));
  // tau's domain is every value but NaN (engine/core/params.h): -1 means every step full.
  CHECK_THAT(ErrorOf(with([](auto& q) { q.mutable_cache()->set_entropy_threshold(std::nanf("")); }),
                     limits),
             Catch::StartsWith("cache.entropy_threshold: must not be NaN"));
  {
    const ModelInfo model = TestModel();
    v1::GenerateRequest always_full =
        with([](auto& q) { q.mutable_cache()->set_entropy_threshold(-1); });
    absl::StatusOr<GenerationRequest> g =
        ToGenerationRequest(always_full, ResolveRequestDefaults(model, {}, {}), limits, model);
    INFO(g.status().ToString());
    REQUIRE(g.ok());
    CHECK(g->cache.entropy_threshold == -1.0f);
  }
  CHECK_THAT(ErrorOf(with([](auto& q) { q.mutable_cache()->set_recent_k(-1); }), limits),
             Catch::Contains("cache.recent_k"));
  CHECK_THAT(ErrorOf(with([](auto& q) { q.mutable_cache()->set_refresh_interval(0); }), limits),
             Catch::Contains("cache.refresh_interval"));
  // The default bound (0.1): a client cannot make every partial step pay for a shadow.
  CHECK_THAT(
      ErrorOf(with([](auto& q) { q.mutable_cache()->set_shadow_sample_rate(0.5f); }), limits),
      Catch::Contains("cache.shadow_sample_rate: 0.5 exceeds limits.max_shadow_sample_rate (0.1)"));
  CHECK_THAT(
      ErrorOf(with([](auto& q) { q.mutable_cache()->set_shadow_sample_rate(-0.5f); }), limits),
      Catch::Contains("cache.shadow_sample_rate"));
  CHECK_THAT(
      ErrorOf(with([](auto& q) { q.mutable_cache()->set_shadow_sample_rate(2.0f); }), limits),
      Catch::Contains("cache.shadow_sample_rate"));
  CHECK_THAT(ErrorOf(with([](auto& q) { q.mutable_stream()->set_canvas_every_steps(-2); }), limits),
             Catch::Contains("stream.canvas_every_steps"));
  CHECK_THAT(ErrorOf(with([](auto& q) { q.set_request_id(std::string(200, 'a')); }), limits),
             Catch::Contains("request_id"));
  CHECK_THAT(ErrorOf(with([](auto& q) { q.set_request_id("a b"); }), limits),
             Catch::Contains("request_id"));

  v1::GenerateRequest ids;
  ids.mutable_token_ids()->add_ids(1);
  ids.mutable_token_ids()->add_ids(1000);
  CHECK_THAT(ErrorOf(ids, limits),
             Catch::Contains("token_ids.ids[1]: id 1000 is outside [0, vocab_size=1000)"));
  ids.mutable_token_ids()->add_ids(1);
  ids.mutable_token_ids()->add_ids(1);
  CHECK_THAT(ErrorOf(ids, limits), Catch::Contains("limits.max_prompt_tokens (3)"));
  CHECK_THAT(ErrorOf(with([](auto& q) { q.mutable_token_ids(); }), limits),
             Catch::Contains("token_ids.ids: must not be empty"));

  v1::GenerateRequest chat;
  CHECK_THAT(ErrorOf(with([](auto& q) { q.mutable_chat(); }), limits),
             Catch::Contains("chat.messages: at least one message"));
  auto* m = chat.mutable_chat()->add_messages();
  m->set_role("robot");
  CHECK_THAT(ErrorOf(chat, limits), Catch::Contains("chat.messages[0].role: 'robot'"));
}

TEST_CASE("request mapping: prompt length check") {
  LimitsSection limits;
  limits.max_prompt_tokens = 4;
  CHECK(CheckPromptLength(4, limits).ok());
  CHECK_THAT(std::string(CheckPromptLength(5, limits).message()),
             Catch::Contains("prompt is 5 tokens, exceeds limits.max_prompt_tokens (4)"));
}

TEST_CASE("request mapping: enum round trips") {
  // Every engine value (the core's full lists) has a proto value that maps back.
  for (Schedule s : kAllSchedules) CHECK(FromProto(ToProto(s)) == s);
  for (Remasking r : kAllRemaskings) CHECK(FromProto(ToProto(r)) == r);
  for (CachePolicyKind p : kAllCachePolicies) {
    INFO(Name(p));
    CHECK(ToProto(p) != v1::CACHE_POLICY_UNSPECIFIED);
    CHECK(FromProto(ToProto(p)) == p);
  }
  CHECK_FALSE(FromProto(v1::SCHEDULE_UNSPECIFIED).has_value());
}

}  // namespace
}  // namespace dllm

namespace dllm {
namespace {

TEST_CASE("request mapping: an unset default block longer than the answer is shortened") {
  const ModelInfo model = TestModel();  // default block_length 32
  const RequestDefaults defaults = ResolveRequestDefaults(model, {}, {});
  v1::GenerateRequest r = Prompt("x");
  r.set_max_new_tokens(8);
  absl::StatusOr<GenerationRequest> g = ToGenerationRequest(r, defaults, {}, model);
  REQUIRE(g.ok());
  CHECK(g->decoding.block_length == 8);
  r.mutable_decoding()->set_block_length(16);  // an explicit value is the caller's: refused
  g = ToGenerationRequest(r, defaults, {}, model);
  REQUIRE_FALSE(g.ok());
  CHECK(g.status().message() == "decoding.block_length: 16 exceeds max_new_tokens (8)");
  r.mutable_decoding()->set_block_length(4);
  g = ToGenerationRequest(r, defaults, {}, model);
  REQUIRE(g.ok());
  CHECK(g->decoding.block_length == 4);
  r.set_max_new_tokens(64);
  r.mutable_decoding()->clear_block_length();
  g = ToGenerationRequest(r, defaults, {}, model);
  REQUIRE(g.ok());
  CHECK(g->decoding.block_length == 32);
}

}  // namespace
}  // namespace dllm

namespace dllm {
namespace {

// Six significant digits printed 1.0000001 as "1", and "1 is outside (0, 1]" contradicts
// itself: a value just past a bound must print with the digits that put it there.
TEST_CASE("request mapping: error messages show values just past a bound exactly") {
  const float past_one = std::nextafter(1.0f, 2.0f);
  v1::GenerateRequest r = Prompt("hi");
  r.mutable_decoding()->set_top_p(past_one);
  CHECK(ErrorOf(r) == "decoding.top_p: 1.0000001 is outside (0, 1]");
  r = Prompt("hi");
  r.mutable_decoding()->set_confidence_threshold(past_one);
  CHECK(ErrorOf(r) == "decoding.confidence_threshold: 1.0000001 is outside [0, 1]");
  LimitsSection limits;
  limits.max_temperature = 2.0f;
  r = Prompt("hi");
  r.mutable_decoding()->set_temperature(std::nextafter(2.0f, 3.0f));
  CHECK(ErrorOf(r, limits) == "decoding.temperature: 2.0000002 exceeds limits.max_temperature (2)");
}

}  // namespace
}  // namespace dllm
