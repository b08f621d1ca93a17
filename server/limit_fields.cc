#include "server/limit_fields.h"

#include <array>

namespace dllm {
namespace {

using L = LimitsSection;
using P = ParamLimits;

constexpr double kMaxCount = 1 << 20;

constexpr std::array<LimitField, 9> kLimitFields = {{
    {"max_new_tokens", &L::max_new_tokens, 1, kMaxCount, &P::max_new_tokens},
    {"max_prompt_tokens", &L::max_prompt_tokens, 1, kMaxCount, {}},
    // 0: derived from the token limit and the model (EffectiveMaxPromptBytes).
    // A gRPC message holds the prompt, so a prompt is no larger than one.
    {"max_prompt_bytes", &L::max_prompt_bytes, 0, static_cast<double>(kMaxGrpcMessageBytes), {}},
    {"max_steps", &L::max_steps, 1, kMaxCount, &P::max_steps},
    {"max_block_length", &L::max_block_length, 1, kMaxCount, &P::max_block_length},
    {"max_window", &L::max_window, 1, kMaxCount, &P::max_window},
    {"max_temperature", &L::max_temperature, 0, 100, &P::max_temperature},
    {"max_shadow_sample_rate", &L::max_shadow_sample_rate, 0, 1, &P::max_shadow_sample_rate},
    // HTTP's `n`: each choice is an engine request of its own.
    {"max_choices", &L::max_choices, 1, 128, {}},
}};

}  // namespace

absl::Span<const LimitField> LimitFields() { return kLimitFields; }

double LimitValue(const LimitsSection& limits, const LimitField& field) {
  return std::visit([&](auto member) { return static_cast<double>(limits.*member); }, field.member);
}

}  // namespace dllm
