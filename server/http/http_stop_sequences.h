// StopSequences: OpenAI's `stop` strings applied to an append-only committed-text stream.
//
// A diffusion model commits tokens out of order, but the server only ever emits the final,
// committed prefix of the answer (CommitEvent::text_delta), so stop strings can be matched
// on it as they would be on an autoregressive stream: the answer is cut before the first
// occurrence of any stop string, and the request can be cancelled right then.
//
// Append() returns the text that is safe to emit: text that cannot be the start of a stop
// string still being completed by later deltas is emitted at once, the last
// (longest stop - 1) bytes are held back (never splitting a UTF-8 character).
//
// Thread-safety: none (one instance per request, used by one thread).
#ifndef DLLM_SERVER_HTTP_HTTP_STOP_SEQUENCES_H_
#define DLLM_SERVER_HTTP_HTTP_STOP_SEQUENCES_H_

#include <string>
#include <string_view>
#include <vector>

namespace dllm {

class StopSequences {
 public:
  // Empty strings are ignored.
  explicit StopSequences(std::vector<std::string> stops);

  bool empty() const { return stops_.empty(); }
  // Adds committed text; returns what may be emitted now. Nothing after stopped().
  std::string Append(std::string_view delta);
  // True once a stop string was found (it and everything after it are never emitted).
  bool stopped() const { return stopped_; }
  // The end of the answer: returns the held-back rest (empty when stopped()).
  std::string Finish();

 private:
  std::vector<std::string> stops_;
  size_t hold_ = 0;  // longest stop string - 1
  std::string pending_;
  bool stopped_ = false;
};

}  // namespace dllm

#endif  // DLLM_SERVER_HTTP_HTTP_STOP_SEQUENCES_H_
