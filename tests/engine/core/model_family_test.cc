// The model family table: one row per family, in enum order, and the facts the rest of the
// engine reads from it, checked against the published models' conventions.
#include "engine/core/model_family.h"

#include <catch2/catch.hpp>
#include <set>
#include <string>

namespace dllm {
namespace {

TEST_CASE("model families: one row per family, found by its config.json model_type",
          "[core][family]") {
  REQUIRE(ModelFamilies().size() == 2);
  std::set<std::string> types;
  for (size_t i = 0; i < ModelFamilies().size(); ++i) {
    const ModelFamilyInfo& f = ModelFamilies()[i];
    CHECK(static_cast<size_t>(f.family) == i);  // enum order
    CHECK(&FamilyInfo(f.family) == &f);
    CHECK(FamilyByModelType(f.model_type) == &f);
    CHECK(types.insert(f.model_type).second);
  }
  CHECK(FamilyByModelType("qwen2") == nullptr);
  CHECK(FamilyByModelType("LLaDA") == nullptr);  // callers lower-case config.json's value
  CHECK(ModelFamilyName(ModelFamily::kLlada) == "LLaDA");
  CHECK(ModelFamilyName(ModelFamily::kDream) == "Dream");
}

TEST_CASE("model families: the facts of the published checkpoints", "[core][family]") {
  // LLaDA-8B-Instruct (OLMo layout) and Dream-v0-Instruct-7B (Qwen2.5 layout), as
  // docs/models.md states them.
  const ModelFamilyInfo& llada = FamilyInfo(ModelFamily::kLlada);
  CHECK(std::string(llada.model_type) == "llada");
  CHECK(std::string(llada.embed) == "model.transformer.wte.weight");
  CHECK(std::string(llada.layer.prefix) + "0" + llada.layer.ffn_norm ==
        "model.transformer.blocks.0.ff_norm.weight");
  CHECK_FALSE(llada.shift_logits);
  CHECK(llada.chat_template == ChatTemplateKind::kLlama3Headers);
  const ModelFamilyInfo& dream = FamilyInfo(ModelFamily::kDream);
  CHECK(std::string(dream.model_type) == "dream");
  CHECK(std::string(dream.layers_field) == "num_hidden_layers");
  CHECK(std::string(dream.layer.prefix) + "3" + dream.layer.q_bias ==
        "model.layers.3.self_attn.q_proj.bias");
  CHECK(dream.shift_logits);
  CHECK(dream.rope_in_bf16);
  CHECK(dream.default_remasking == Remasking::kEntropy);
  CHECK(dream.chat_template == ChatTemplateKind::kChatMl);
}

}  // namespace
}  // namespace dllm
