#include "server/http/http_stop_sequences.h"

#include <algorithm>
#include <utility>

namespace dllm {

StopSequences::StopSequences(std::vector<std::string> stops) {
  for (std::string& s : stops) {
    if (s.empty()) continue;
    hold_ = std::max(hold_, s.size() - 1);
    stops_.push_back(std::move(s));
  }
}

std::string StopSequences::Append(std::string_view delta) {
  if (stopped_) return {};
  pending_.append(delta);
  if (stops_.empty()) return std::exchange(pending_, {});
  size_t first = std::string::npos;
  for (const std::string& s : stops_) first = std::min(first, pending_.find(s));
  if (first != std::string::npos) {
    stopped_ = true;
    std::string out = pending_.substr(0, first);
    pending_.clear();
    return out;
  }
  // No match so far; a match could still start in the last hold_ bytes.
  size_t safe = pending_.size() > hold_ ? pending_.size() - hold_ : 0;
  while (safe > 0 && safe < pending_.size() &&
         (static_cast<unsigned char>(pending_[safe]) & 0xC0) == 0x80) {
    --safe;  // never split a UTF-8 character
  }
  std::string out = pending_.substr(0, safe);
  pending_.erase(0, safe);
  return out;
}

std::string StopSequences::Finish() {
  if (stopped_) return {};
  return std::exchange(pending_, {});
}

}  // namespace dllm
