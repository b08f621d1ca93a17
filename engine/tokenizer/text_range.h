// TextRange: a byte range [begin, end) of a string. The chat template marks where message
// content sits in its output with these, so that the tokenizer reads content as text only
// (tokenizer.h: Tokenizer::Encode's `text_only`).
#ifndef DLLM_ENGINE_TOKENIZER_TEXT_RANGE_H_
#define DLLM_ENGINE_TOKENIZER_TEXT_RANGE_H_

#include <cstddef>

namespace dllm {

struct TextRange {
  size_t begin = 0;
  size_t end = 0;  // one past the last byte
  bool Overlaps(size_t b, size_t e) const { return b < end && begin < e; }
};

}  // namespace dllm

#endif  // DLLM_ENGINE_TOKENIZER_TEXT_RANGE_H_
