// ByteLevel: GPT-2's reversible map between raw bytes and printable code points.
//
// Byte-level BPE vocabularies spell every token in these code points (a space is "Ġ", a
// newline "Ċ"), so encoding maps each input byte to one code point before BPE and decoding
// maps the code points of the chosen tokens back to bytes. The map is GPT-2's
// bytes_to_unicode(): printable Latin-1 bytes stand for themselves, the other 68 bytes take
// code points 256.. in byte order.
//
// Thread-safety: immutable after construction.
#ifndef DLLM_ENGINE_TOKENIZER_BYTE_LEVEL_H_
#define DLLM_ENGINE_TOKENIZER_BYTE_LEVEL_H_

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace dllm {

class ByteLevelMap {
 public:
  ByteLevelMap();

  // Appends the mapped code point (UTF-8) of every byte of `bytes` to `out`.
  void Encode(std::string_view bytes, std::string* out) const;

  // Maps the code points of `mapped` back to bytes and appends them to `out`. Returns false,
  // leaving `out` unchanged, if `mapped` is not valid UTF-8 or holds a code point outside the
  // map (then the caller uses the token's text as it is, as HF's ByteLevel decoder does).
  bool Decode(std::string_view mapped, std::string* out) const;

  // The code point a byte maps to.
  char32_t CodePointFor(uint8_t byte) const { return byte_to_cp_[byte]; }

 private:
  static constexpr int kMaxCodePoint = 324;  // 256 + 68 remapped bytes
  std::array<char32_t, 256> byte_to_cp_{};
  std::array<std::string, 256> byte_to_utf8_;
  std::array<int16_t, kMaxCodePoint> cp_to_byte_{};  // -1: not in the map
};

}  // namespace dllm

#endif  // DLLM_ENGINE_TOKENIZER_BYTE_LEVEL_H_
