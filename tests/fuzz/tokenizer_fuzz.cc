// libFuzzer target: arbitrary bytes -> Tokenizer::Encode -> Decode, with the tokenizer of
// models/llada-tiny (byte-level BPE with added tokens and a pre-tokenizer regex).
//
// Every id is inside the vocabulary. The tokenizer has no normalizer and is byte-level, so
// valid UTF-8 round-trips exactly: the ids' TokenBytes concatenate to the input and Decode
// returns it. Any other input still decodes to valid UTF-8.
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>

#include "engine/tokenizer/tokenizer.h"
#include "engine/tokenizer/utf8.h"

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
  const std::string decoded = tokenizer->Decode(ids, /*skip_special=*/false);
  if (dllm::IsValidUtf8(text)) {
    Require(joined == text);
    Require(decoded == text);
  } else {
    Require(dllm::IsValidUtf8(decoded));
  }
  return 0;
}
