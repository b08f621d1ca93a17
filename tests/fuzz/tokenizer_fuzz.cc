// libFuzzer target: arbitrary bytes -> Tokenizer::Encode -> Decode, with the tokenizer of
// models/llada-tiny (byte-level BPE with added tokens and a pre-tokenizer regex).
//
// Every id is inside the vocabulary, and decoding the ids without skipping specials gives
// back exactly the concatenated TokenBytes (the two decode paths agree).
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>

#include "engine/tokenizer/tokenizer.h"

namespace {
void Require(bool condition) {
  if (!condition) std::abort();
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::unique_ptr<dllm::Tokenizer> tokenizer = [] {
    auto t = dllm::Tokenizer::LoadFromDir(DLLM_FUZZ_TOKENIZER_DIR);
    Require(t.ok());
    return std::move(*t);
  }();
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const std::vector<int32_t> ids = tokenizer->Encode(text);
  Require(size == 0 || !ids.empty());
  std::string joined;
  for (int32_t id : ids) {
    Require(id >= 0 && id < tokenizer->size());
    joined += tokenizer->TokenBytes(id);
  }
  Require(tokenizer->Decode(ids, /*skip_special=*/false) == joined);
  return 0;
}
