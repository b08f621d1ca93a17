#include "engine/decoding/utf8_stream.h"

#include <cstdint>

namespace dllm {
namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";

// Expected sequence length for a lead byte, 0 if it cannot start a sequence.
int SequenceLength(uint8_t lead) {
  if (lead < 0x80) return 1;
  if (lead >= 0xC2 && lead <= 0xDF) return 2;
  if (lead >= 0xE0 && lead <= 0xEF) return 3;
  if (lead >= 0xF0 && lead <= 0xF4) return 4;
  return 0;
}

// Whether byte `b` may follow at index `i` (1-based continuation index) after `lead`.
bool ValidContinuation(uint8_t lead, int i, uint8_t b) {
  if (i == 1) {
    if (lead == 0xE0) return b >= 0xA0 && b <= 0xBF;
    if (lead == 0xED) return b >= 0x80 && b <= 0x9F;
    if (lead == 0xF0) return b >= 0x90 && b <= 0xBF;
    if (lead == 0xF4) return b >= 0x80 && b <= 0x8F;
  }
  return b >= 0x80 && b <= 0xBF;
}

}  // namespace

std::string Utf8Stream::Append(std::string_view bytes) {
  std::string buffer = pending_;
  buffer.append(bytes);
  pending_.clear();
  std::string out;
  size_t i = 0;
  while (i < buffer.size()) {
    const uint8_t lead = static_cast<uint8_t>(buffer[i]);
    const int length = SequenceLength(lead);
    if (length == 0) {
      out.append(kReplacement);
      ++i;
      continue;
    }
    int valid = 1;  // bytes of the sequence that are valid so far
    while (valid < length && i + valid < buffer.size() &&
           ValidContinuation(lead, valid, static_cast<uint8_t>(buffer[i + valid])))
      ++valid;
    if (valid == length) {
      out.append(buffer, i, length);
      i += length;
    } else if (i + valid == buffer.size()) {
      pending_ = buffer.substr(i);  // a valid but incomplete prefix: wait for more bytes
      break;
    } else {
      out.append(kReplacement);
      i += valid;
    }
  }
  return out;
}

std::string Utf8Stream::Finish() {
  std::string out = pending_.empty() ? std::string() : std::string(kReplacement);
  pending_.clear();
  return out;
}

}  // namespace dllm
