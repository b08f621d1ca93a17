// ModelFamily: which of the supported model families a checkpoint belongs to, and the one
// table of what differs between them (as llama.cpp's llama-arch): the config.json spelling
// that selects a family, its checkpoint tensor names, the arithmetic facts fixed by the
// family (logit shift, RoPE rounding), its default request parameters and its chat template.
//
// A core value type: the model config (model/) parses it, the chat templates (tokenizer/)
// and the engine's defaults read it, so it lives below all of them. What stays family code
// elsewhere is code, not facts: the config.json readers (engine/model/model_config.cc) and
// the chat template renderers (engine/tokenizer/chat_template.cc), one function each, chosen
// through this table. docs/layout.md has the recipe for a new family.
//
// Thread-safety: immutable static data.
#ifndef DLLM_ENGINE_CORE_MODEL_FAMILY_H_
#define DLLM_ENGINE_CORE_MODEL_FAMILY_H_

#include <span>
#include <string_view>

#include "engine/core/params.h"

namespace dllm {

enum class ModelFamily { kLlada, kDream };

// The per-layer tensor names: the layer index is spliced between `prefix` and each suffix.
struct LayerTensorNames {
  const char* prefix;  // "model.transformer.blocks."
  const char *attn_norm, *q, *k, *v, *o, *ffn_norm, *gate, *up, *down;
  const char *q_bias, *k_bias, *v_bias;
};

enum class ChatTemplateKind {
  kLlama3Headers,  // LLaDA: <|start_header_id|>role<|end_header_id|>, trimmed content
  kChatMl,         // Dream (Qwen2.5): <|im_start|>role, default system prompt
};

struct ModelFamilyInfo {
  ModelFamily family;
  const char* name;          // "LLaDA": logs and reports
  const char* model_type;    // config.json "model_type", lower-cased; also ModelInfo::family
  const char* layers_field;  // the config.json field that declares the layer count
  // Checkpoint tensors.
  const char *embed, *final_norm, *lm_head;
  LayerTensorNames layer;
  // The model's arithmetic, fixed by the family.
  bool shift_logits;  // position p is predicted by the row of p-1 (Dream)
  bool rope_in_bf16;  // RoPE's cos/sin rounded through bf16 (Dream)
  ChatTemplateKind chat_template;
  // Request defaults for the family's decoding (generation_config.json may override the
  // answer length; engine/model/generation_config.h): EntropyCache's tuned point, whose
  // schedule is the paper's own, a sliding window with confidence-threshold decoding. The
  // tuning protocol (bench/tune.py) searched schedule, window and threshold with τ and k; on
  // both families' cot models the fastest EntropyCache setting within 1 point of vanilla on
  // val that also held on test decodes the window of the 16 leftmost masks at threshold 0.9,
  // with τ 1 and k 16 (on LLaDA's the fastest val point, block 32 at τ 2, lost 7 points on
  // test). Evidence: docs/paper-comparison.md, "Defaults". The published schedules (LLaDA's
  // blocks, Dream's timesteps) stay a request field away. `vanilla_remasking` is the plain
  // confidence ranking of the paper's vanilla baseline (block 32, one token per step).
  Schedule default_schedule;
  int default_window;                  // masks in the window (Schedule::kWindow)
  float default_confidence_threshold;  // > 0: threshold decoding
  Remasking default_remasking;
  Remasking vanilla_remasking;
  // EntropyCache's τ and recent k at that point.
  float default_tau_nats;
  int default_recent_k;
  // The tau a request with a deadline switches to when its deadline is at risk under load
  // (CacheParams::entropy_threshold_under_load): 2, where the entropy trigger never fires on
  // the cot models under window decoding, chosen with engine.tau_switch_slack_ratio on the val
  // split (docs/serving-simulation.md, "SLO-aware τ").
  float default_tau_under_load_nats;
};

// Every family, in enum order.
std::span<const ModelFamilyInfo> ModelFamilies();
const ModelFamilyInfo& FamilyInfo(ModelFamily family);
// The family whose model_type is `model_type` (lower case), or nullptr.
const ModelFamilyInfo* FamilyByModelType(std::string_view model_type);

std::string_view ModelFamilyName(ModelFamily family);  // "LLaDA" | "Dream"

}  // namespace dllm

#endif  // DLLM_ENGINE_CORE_MODEL_FAMILY_H_
