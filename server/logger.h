// Structured logging to a stream (stderr in the server): one line per event, either
// `<time> <LEVEL> <event> key=value ...` (text) or one JSON object per line (json).
//
// Thread-safety: Log may be called from any thread; lines never interleave.
#ifndef DLLM_SERVER_LOGGER_H_
#define DLLM_SERVER_LOGGER_H_

#include <cstdint>
#include <ostream>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "server/config.h"

namespace dllm {

using LogValue = std::variant<std::string, int64_t, double, bool>;
using LogFields = std::vector<std::pair<std::string, LogValue>>;

class Logger {
 public:
  Logger(LogLevel level, LogFormat format, std::ostream* out)
      : level_(level), format_(format), out_(out) {}

  bool Enabled(LogLevel level) const { return level >= level_; }
  void Log(LogLevel level, std::string_view event, const LogFields& fields = {});
  void Info(std::string_view event, const LogFields& fields = {}) {
    Log(LogLevel::kInfo, event, fields);
  }
  void Warning(std::string_view event, const LogFields& fields = {}) {
    Log(LogLevel::kWarning, event, fields);
  }
  void Error(std::string_view event, const LogFields& fields = {}) {
    Log(LogLevel::kError, event, fields);
  }

  // The line Log would write, without the trailing newline (exposed for tests).
  std::string Format(LogLevel level, std::string_view event, const LogFields& fields) const;

 private:
  const LogLevel level_;
  const LogFormat format_;
  absl::Mutex mu_;
  std::ostream* out_ ABSL_GUARDED_BY(mu_);
};

}  // namespace dllm

#endif  // DLLM_SERVER_LOGGER_H_
