#include "engine/model/generation_config.h"

#include <catch2/catch.hpp>
#include <string>

#include "engine/core/model_family.h"
#include "engine/engine_impl.h"
#include "engine/model/model_config.h"

namespace dllm {
namespace {

TEST_CASE("generation_config: max_new_tokens, then gen_length, else absent",
          "[generation_config]") {
  auto hf = ParseGenerationConfig(R"({"max_new_tokens": 12, "gen_length": 99})", "g.json");
  REQUIRE(hf.ok());
  CHECK(hf->max_new_tokens == 12);
  auto llada = ParseGenerationConfig(R"({"gen_length": 10, "steps": 10})", "g.json");
  REQUIRE(llada.ok());
  CHECK(llada->max_new_tokens == 10);
  auto none = ParseGenerationConfig(R"({"temperature": 0.0, "max_new_tokens": null})", "g.json");
  REQUIRE(none.ok());
  CHECK_FALSE(none->max_new_tokens.has_value());
}

TEST_CASE("generation_config: bad values name the file and the key", "[generation_config]") {
  for (const char* text : {"[1, 2]", "{not json", R"({"max_new_tokens": 0})",
                           R"({"gen_length": "ten"})", R"({"max_new_tokens": 2.5})"}) {
    auto parsed = ParseGenerationConfig(text, "models/x/generation_config.json");
    REQUIRE_FALSE(parsed.ok());
    CHECK(std::string(parsed.status().message()).find("models/x/generation_config.json") !=
          std::string::npos);
  }
}

TEST_CASE("generation_config: the shipped models' answer lengths become the default",
          "[generation_config]") {
  const std::string models = std::string(DLLM_SOURCE_DIR) + "/models/";
  auto llada = LoadGenerationConfig(models + "llada-tiny");
  REQUIRE(llada.ok());
  REQUIRE(llada->max_new_tokens.has_value());
  auto missing = LoadGenerationConfig(std::string(DLLM_TEST_DATA_DIR) + "/config");
  REQUIRE(missing.ok());
  CHECK_FALSE(missing->max_new_tokens.has_value());

  ModelConfig config;
  CHECK(MakeModelInfo(config, "dir").default_max_new_tokens == 64);
  CHECK(MakeModelInfo(config, "dir", *llada).default_max_new_tokens == *llada->max_new_tokens);
  CHECK(MakeModelInfo(config, "dir").default_cache.policy == CachePolicyKind::kEntropy);
  // EntropyCache's knobs come from the family's row, whichever family it is.
  for (const ModelFamilyInfo& family : ModelFamilies()) {
    INFO(family.name);
    config.family = family.family;
    const CacheParams c = MakeModelInfo(config, "dir").default_cache;
    CHECK(c.entropy_threshold == family.default_tau_nats);
    CHECK(c.recent_k == family.default_recent_k);
  }
  // Not the bare struct's defaults: a row that the wiring ignored would pass the loop above.
  CHECK(FamilyInfo(ModelFamily::kLlada).default_recent_k != CacheParams{}.recent_k);
}

}  // namespace
}  // namespace dllm
