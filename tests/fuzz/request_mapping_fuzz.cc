// libFuzzer target: raw GenerateRequest / TokenizeRequest bytes -> ParseRequestBytes ->
// ToGenerationRequest / ToTokenizeRequest, i.e. everything the server does with a request
// before the engine sees it.
//
// Besides "no crash, no sanitizer report": a mapped request respects every limit it was
// mapped against (the limits are the point of the mapping), and a request that parses has
// valid UTF-8 in every string field the mapping passes on.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "server/request_decoding.h"
#include "server/request_mapping.h"

namespace {

void Require(bool condition) {
  if (!condition) std::abort();
}

dllm::ModelInfo Model() {
  dllm::ModelInfo m;
  m.family = "llada";
  m.vocab_size = 600;
  m.max_positions = 4096;
  m.mask_token_id = 599;
  m.end_token_ids = {598};
  m.default_decoding.block_length = 32;
  return m;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const dllm::ModelInfo model = Model();
  static const dllm::LimitsSection limits = [] {
    dllm::LimitsSection l;
    l.max_prompt_bytes = dllm::EffectiveMaxPromptBytes(l, model);
    return l;
  }();
  static const dllm::RequestDefaults defaults =
      dllm::ResolveRequestDefaults(model, dllm::DecodingDefaults{}, dllm::CacheDefaults{});
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);

  dllm::v1::GenerateRequest request;
  if (dllm::ParseRequestBytes(bytes, &request).ok()) {
    Require(dllm::IsValidUtf8(request.request_id()));
    Require(dllm::IsValidUtf8(request.prompt()));
    auto mapped = dllm::ToGenerationRequest(request, defaults, limits, model);
    if (mapped.ok()) {
      const dllm::GenerationRequest& r = *mapped;
      Require(r.max_new_tokens >= 1 && r.max_new_tokens <= limits.max_new_tokens);
      Require(r.decoding.steps >= 0 && r.decoding.steps <= limits.max_steps);
      Require(r.decoding.block_length >= 1 && r.decoding.block_length <= limits.max_block_length);
      Require(r.decoding.top_p > 0 && r.decoding.top_p <= 1);
      Require(r.decoding.temperature >= 0 && r.decoding.temperature <= limits.max_temperature);
      Require(r.cache.recent_k >= 0);
      Require(static_cast<int>(r.prompt_ids.size()) <= limits.max_prompt_tokens);
      for (int32_t id : r.prompt_ids) Require(id >= 0 && id < model.vocab_size);
      if (r.prompt_text) {
        Require(static_cast<int64_t>(r.prompt_text->size()) <= limits.max_prompt_bytes);
      }
      for (const auto& m : r.messages) Require(dllm::IsValidUtf8(m.content));
    } else {
      Require(!mapped.status().message().empty());
    }
  }
  dllm::v1::TokenizeRequest tokenize;
  if (dllm::ParseRequestBytes(bytes, &tokenize).ok()) {
    auto mapped = dllm::ToTokenizeRequest(tokenize, limits);
    if (mapped.ok() && mapped->prompt_text) {
      Require(static_cast<int64_t>(mapped->prompt_text->size()) <= limits.max_prompt_bytes);
    }
  }
  return 0;
}
