#include "server/http/http_status_mapping.h"

#include <nlohmann/json.hpp>

namespace dllm {
namespace {

// A field path: identifiers joined by '.', optionally indexed ("messages[0].role").
bool LooksLikeFieldPath(std::string_view s) {
  if (s.empty() || s.size() > 64) return false;
  for (char c : s) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '.' || c == '[' || c == ']';
    if (!ok) return false;
  }
  return true;
}

nlohmann::json ErrorObject(std::string_view message, std::string_view type,
                           const nlohmann::json& param, std::string_view code) {
  return {{"message", std::string(message)},
          {"type", std::string(type)},
          {"param", param},
          {"code", code.empty() ? nlohmann::json() : nlohmann::json(code)}};
}

std::string Body(nlohmann::json error) {
  return nlohmann::json{{"error", std::move(error)}}.dump(-1, ' ', false,
                                                          nlohmann::json::error_handler_t::replace);
}

}  // namespace

HttpError ToHttpError(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kOk:
      return {200, "", ""};
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange:
      return {400, "invalid_request_error", "invalid_value"};
    case absl::StatusCode::kFailedPrecondition:
      return {400, "invalid_request_error", "failed_precondition"};
    case absl::StatusCode::kUnauthenticated:
      return {401, "authentication_error", "invalid_api_key"};
    case absl::StatusCode::kPermissionDenied:
      return {403, "permission_error", "permission_denied"};
    case absl::StatusCode::kNotFound:
      return {404, "not_found_error", "not_found"};
    case absl::StatusCode::kResourceExhausted:
      return {429, "rate_limit_error", "queue_full"};
    case absl::StatusCode::kCancelled:
      return {499, "cancelled", "cancelled"};
    case absl::StatusCode::kUnimplemented:
      return {501, "not_implemented", "not_implemented"};
    case absl::StatusCode::kUnavailable:
      return {503, "service_unavailable", "unavailable"};
    case absl::StatusCode::kDeadlineExceeded:
      return {504, "timeout", "deadline_exceeded"};
    default:
      return {500, "internal_error", "internal"};
  }
}

nlohmann::json HttpErrorObject(const absl::Status& status) {
  const HttpError e = ToHttpError(status);
  const std::string_view message(status.message().data(), status.message().size());
  nlohmann::json param;
  if (const size_t colon = message.find(": "); colon != std::string_view::npos) {
    const std::string_view head = message.substr(0, colon);
    if (LooksLikeFieldPath(head)) param = std::string(head);
  }
  return ErrorObject(message, e.type, param, e.code);
}

std::string HttpErrorBody(const absl::Status& status) { return Body(HttpErrorObject(status)); }

std::string HttpErrorBody(std::string_view message, std::string_view type, std::string_view code) {
  return Body(ErrorObject(message, type, nlohmann::json(), code));
}

}  // namespace dllm
