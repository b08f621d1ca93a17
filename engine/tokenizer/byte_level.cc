#include "engine/tokenizer/byte_level.h"

#include "engine/tokenizer/utf8.h"

namespace dllm {

ByteLevelMap::ByteLevelMap() {
  cp_to_byte_.fill(-1);
  auto printable = [](int b) {
    return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
  };
  int next_extra = 256;
  for (int b = 0; b < 256; ++b) {
    const char32_t cp = printable(b) ? static_cast<char32_t>(b) : next_extra++;
    byte_to_cp_[b] = cp;
    cp_to_byte_[cp] = static_cast<int16_t>(b);
    AppendUtf8(cp, &byte_to_utf8_[b]);
  }
}

void ByteLevelMap::Encode(std::string_view bytes, std::string* out) const {
  for (const char c : bytes) out->append(byte_to_utf8_[static_cast<uint8_t>(c)]);
}

bool ByteLevelMap::Decode(std::string_view mapped, std::string* out) const {
  const size_t start = out->size();
  for (size_t pos = 0; pos < mapped.size();) {
    const size_t len = ValidUtf8SequenceLength(mapped, pos);
    const char32_t cp = len == 0 ? kMaxCodePoint : DecodeUtf8At(mapped, pos, len);
    if (cp >= kMaxCodePoint || cp_to_byte_[cp] < 0) {
      out->resize(start);
      return false;
    }
    out->push_back(static_cast<char>(cp_to_byte_[cp]));
    pos += len;
  }
  return true;
}

}  // namespace dllm
