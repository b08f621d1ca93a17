#include "engine/core/model_family.h"

#include <array>

namespace dllm {
namespace {

constexpr std::array<ModelFamilyInfo, 2> kFamilies = {{
    {
        .family = ModelFamily::kLlada,
        .name = "LLaDA",
        .model_type = "llada",
        .layers_field = "n_layers",
        .embed = "model.transformer.wte.weight",
        .final_norm = "model.transformer.ln_f.weight",
        .lm_head = "model.transformer.ff_out.weight",
        .layer = {"model.transformer.blocks.", ".attn_norm.weight", ".q_proj.weight",
                  ".k_proj.weight", ".v_proj.weight", ".attn_out.weight", ".ff_norm.weight",
                  ".ff_proj.weight", ".up_proj.weight", ".ff_out.weight", ".q_proj.bias",
                  ".k_proj.bias", ".v_proj.bias"},
        .shift_logits = false,
        .rope_in_bf16 = false,
        .chat_template = ChatTemplateKind::kLlama3Headers,
        .default_schedule = Schedule::kWindow,
        .default_window = 16,
        .default_confidence_threshold = 0.9f,
        .default_remasking = Remasking::kLowConfidence,
        .vanilla_remasking = Remasking::kLowConfidence,
        .default_tau_nats = 1.0f,
        .default_recent_k = 16,
        .default_tau_under_load_nats = 2.0f,
    },
    {
        .family = ModelFamily::kDream,
        .name = "Dream",
        .model_type = "dream",
        .layers_field = "num_hidden_layers",
        .embed = "model.embed_tokens.weight",
        .final_norm = "model.norm.weight",
        .lm_head = "lm_head.weight",
        .layer = {"model.layers.", ".input_layernorm.weight", ".self_attn.q_proj.weight",
                  ".self_attn.k_proj.weight", ".self_attn.v_proj.weight",
                  ".self_attn.o_proj.weight", ".post_attention_layernorm.weight",
                  ".mlp.gate_proj.weight", ".mlp.up_proj.weight", ".mlp.down_proj.weight",
                  ".self_attn.q_proj.bias", ".self_attn.k_proj.bias", ".self_attn.v_proj.bias"},
        .shift_logits = true,
        .rope_in_bf16 = true,
        .chat_template = ChatTemplateKind::kChatMl,
        .default_schedule = Schedule::kWindow,
        .default_window = 16,
        .default_confidence_threshold = 0.9f,
        .default_remasking = Remasking::kEntropy,
        .vanilla_remasking = Remasking::kMaskgitPlus,
        .default_tau_nats = 1.0f,
        .default_recent_k = 16,
        .default_tau_under_load_nats = 2.0f,
    },
}};

}  // namespace

std::span<const ModelFamilyInfo> ModelFamilies() { return kFamilies; }

const ModelFamilyInfo& FamilyInfo(ModelFamily family) {
  for (const ModelFamilyInfo& f : kFamilies) {
    if (f.family == family) return f;
  }
  return kFamilies[0];  // unreachable: every enum value has a row (model_family_test)
}

const ModelFamilyInfo* FamilyByModelType(std::string_view model_type) {
  for (const ModelFamilyInfo& f : kFamilies) {
    if (model_type == f.model_type) return &f;
  }
  return nullptr;
}

std::string_view ModelFamilyName(ModelFamily family) { return FamilyInfo(family).name; }

}  // namespace dllm
