#include "server/logger.h"

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace dllm {
namespace {

const char* LevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug:
      return "DEBUG";
    case LogLevel::kInfo:
      return "INFO";
    case LogLevel::kWarning:
      return "WARNING";
    case LogLevel::kError:
      return "ERROR";
  }
  return "INFO";
}

nlohmann::ordered_json ToJson(const LogValue& value) {
  return std::visit([](const auto& v) { return nlohmann::ordered_json(v); }, value);
}

// Text values are quoted (JSON string escaping) when they contain spaces, quotes or '='.
std::string ToText(const LogValue& value) {
  if (const auto* s = std::get_if<std::string>(&value)) {
    const bool plain = !s->empty() && s->find_first_of(" \t\n\"=\\") == std::string::npos;
    return plain
               ? *s
               : nlohmann::json(*s).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }
  if (const auto* d = std::get_if<double>(&value)) return absl::StrFormat("%.6g", *d);
  if (const auto* b = std::get_if<bool>(&value)) return *b ? "true" : "false";
  return absl::StrCat(std::get<int64_t>(value));
}

}  // namespace

std::string Logger::Format(LogLevel level, std::string_view event, const LogFields& fields) const {
  const std::string time =
      absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", absl::Now(), absl::UTCTimeZone());
  if (format_ == LogFormat::kJson) {
    nlohmann::ordered_json line;
    line["time"] = time;
    line["level"] = LevelName(level);
    line["event"] = std::string(event);
    for (const auto& [key, value] : fields) line[key] = ToJson(value);
    return line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }
  std::string line = absl::StrCat(time, " ", LevelName(level), " ", std::string(event));
  for (const auto& [key, value] : fields) absl::StrAppend(&line, " ", key, "=", ToText(value));
  return line;
}

void Logger::Log(LogLevel level, std::string_view event, const LogFields& fields) {
  if (!Enabled(level)) return;
  const std::string line = Format(level, event, fields);
  absl::MutexLock lock(&mu_);
  *out_ << line << '\n';
  out_->flush();
}

}  // namespace dllm
