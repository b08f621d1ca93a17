// Utf8Stream: turns a stream of token bytes into append-only text that never splits a
// UTF-8 character. Incomplete trailing sequences are held back until completed; invalid
// bytes become U+FFFD (one per maximal invalid subpart, as most decoders do).
#ifndef DLLM_ENGINE_DECODING_UTF8_STREAM_H_
#define DLLM_ENGINE_DECODING_UTF8_STREAM_H_

#include <string>
#include <string_view>

namespace dllm {

class Utf8Stream {
 public:
  // Appends raw bytes; returns the newly complete, valid UTF-8 text.
  std::string Append(std::string_view bytes);
  // Ends the stream: a held-back incomplete sequence becomes U+FFFD.
  std::string Finish();

 private:
  std::string pending_;
};

}  // namespace dllm

#endif  // DLLM_ENGINE_DECODING_UTF8_STREAM_H_
