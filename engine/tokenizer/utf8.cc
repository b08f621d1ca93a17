#include "engine/tokenizer/utf8.h"

#include <cstdint>

namespace dllm {

void AppendUtf8(char32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

namespace {

// Lead byte → (sequence length, allowed range of the second byte). The narrowed second-byte
// ranges exclude overlong forms, surrogates and code points above U+10FFFF.
struct LeadInfo {
  int length;
  uint8_t lower;
  uint8_t upper;
};

LeadInfo InfoForLead(uint8_t b) {
  if (b < 0x80) return {1, 0, 0};
  if (b >= 0xC2 && b <= 0xDF) return {2, 0x80, 0xBF};
  if (b == 0xE0) return {3, 0xA0, 0xBF};
  if (b == 0xED) return {3, 0x80, 0x9F};
  if (b >= 0xE1 && b <= 0xEF) return {3, 0x80, 0xBF};
  if (b == 0xF0) return {4, 0x90, 0xBF};
  if (b == 0xF4) return {4, 0x80, 0x8F};
  if (b >= 0xF1 && b <= 0xF3) return {4, 0x80, 0xBF};
  return {0, 0, 0};
}

// Number of bytes from `pos` that form a (possibly truncated) prefix of a valid sequence,
// and whether it is complete. A lone invalid byte yields {1, false}.
struct Scan {
  size_t length;
  bool complete;
};

Scan ScanAt(std::string_view text, size_t pos) {
  const auto lead = static_cast<uint8_t>(text[pos]);
  const LeadInfo info = InfoForLead(lead);
  if (info.length == 1) return {1, true};
  if (info.length == 0) return {1, false};
  size_t i = 1;
  for (; i < static_cast<size_t>(info.length); ++i) {
    if (pos + i >= text.size()) return {i, false};
    const auto b = static_cast<uint8_t>(text[pos + i]);
    const uint8_t lower = i == 1 ? info.lower : 0x80;
    const uint8_t upper = i == 1 ? info.upper : 0xBF;
    if (b < lower || b > upper) return {i, false};
  }
  return {i, true};
}

}  // namespace

size_t ValidUtf8SequenceLength(std::string_view text, size_t pos) {
  const Scan s = ScanAt(text, pos);
  return s.complete ? s.length : 0;
}

char32_t DecodeUtf8At(std::string_view text, size_t pos, size_t len) {
  const auto b0 = static_cast<uint8_t>(text[pos]);
  if (len == 1) return b0;
  char32_t cp = b0 & (len == 2 ? 0x1F : len == 3 ? 0x0F : 0x07);
  for (size_t i = 1; i < len; ++i) cp = (cp << 6) | (static_cast<uint8_t>(text[pos + i]) & 0x3F);
  return cp;
}

bool IsValidUtf8(std::string_view text) {
  for (size_t pos = 0; pos < text.size();) {
    const size_t len = ValidUtf8SequenceLength(text, pos);
    if (len == 0) return false;
    pos += len;
  }
  return true;
}

std::string ToValidUtf8(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  for (size_t pos = 0; pos < bytes.size();) {
    const Scan s = ScanAt(bytes, pos);
    if (s.complete) {
      out.append(bytes.substr(pos, s.length));
    } else {
      // One U+FFFD per maximal subpart: the bytes that were a valid prefix are consumed
      // together, and the byte that broke the sequence is examined afresh.
      AppendUtf8(kReplacementChar, &out);
    }
    pos += s.length;
  }
  return out;
}

}  // namespace dllm
