// FakeTokenizer: a byte-level Tokenizer for tests. Ids 10..265 are the bytes 0..255, so any
// text round-trips and a multi-byte character ("€" = E2 82 AC) spans several tokens, as in a
// real byte-level BPE; ids below 10 and from 266 up are special (end tokens, the mask).
#ifndef DLLM_TESTS_SUPPORT_FAKE_TOKENIZER_H_
#define DLLM_TESTS_SUPPORT_FAKE_TOKENIZER_H_

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/tokenizer/tokenizer.h"

namespace dllm::testing {

inline constexpr int32_t kFakeByteBase = 10;
inline constexpr int32_t kFakeVocab = kFakeByteBase + 256 + 6;  // bytes plus a few specials

// The token of one byte.
constexpr int32_t ByteToken(unsigned char byte) { return kFakeByteBase + byte; }

class FakeTokenizer final : public Tokenizer {
 public:
  using Tokenizer::Encode;
  std::vector<int32_t> Encode(std::string_view text, std::span<const TextRange>) const override {
    std::vector<int32_t> ids;
    ids.reserve(text.size());
    for (unsigned char c : text) ids.push_back(ByteToken(c));
    return ids;
  }
  std::string Decode(std::span<const int32_t> ids, bool skip_special) const override {
    std::string out;
    for (int32_t id : ids)
      if (!skip_special || !IsSpecial(id)) out += TokenBytes(id);
    return out;
  }
  std::string TokenBytes(int32_t id) const override {
    if (IsSpecial(id)) return absl::StrCat("<", id, ">");
    return std::string(1, static_cast<char>(id - kFakeByteBase));
  }
  std::optional<int32_t> TokenToId(std::string_view) const override { return std::nullopt; }
  bool IsSpecial(int32_t id) const override {
    return id < kFakeByteBase || id >= kFakeByteBase + 256;
  }
  int32_t size() const override { return kFakeVocab; }
};

}  // namespace dllm::testing

#endif  // DLLM_TESTS_SUPPORT_FAKE_TOKENIZER_H_
