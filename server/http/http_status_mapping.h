// The one place where absl::Status becomes an HTTP status and an OpenAI-style error body
// (the HTTP counterpart of status_mapping.h).
//
//   INVALID_ARGUMENT, OUT_OF_RANGE, FAILED_PRECONDITION  400 invalid_request_error
//   UNAUTHENTICATED                                      401 authentication_error
//   PERMISSION_DENIED                                    403 permission_error
//   NOT_FOUND                                            404 not_found_error
//   RESOURCE_EXHAUSTED (queue full, KV budget)           429 rate_limit_error
//   CANCELLED                                            499 (the client is gone; never read)
//   UNIMPLEMENTED                                        501 not_implemented
//   UNAVAILABLE (loading, draining)                      503 service_unavailable
//   DEADLINE_EXCEEDED                                    504 timeout
//   anything else                                        500 internal_error
#ifndef DLLM_SERVER_HTTP_HTTP_STATUS_MAPPING_H_
#define DLLM_SERVER_HTTP_HTTP_STATUS_MAPPING_H_

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace dllm {

struct HttpError {
  int status = 500;
  std::string type;  // OpenAI error type, e.g. "invalid_request_error"
  std::string code;  // machine-readable code, e.g. "invalid_value", "queue_full"
};

HttpError ToHttpError(const absl::Status& status);

// {"error": {"message", "type", "param", "code"}}. `param` is the request field the message
// names: the text before the first ": " when it looks like a field path
// ("decoding.steps: 5000 exceeds ..." -> "decoding.steps"), else null.
std::string HttpErrorBody(const absl::Status& status);
// The inner {"message", "type", "param", "code"} object, for an error inside a reply (one
// failed choice of several).
nlohmann::json HttpErrorObject(const absl::Status& status);
// The same for a status produced by the HTTP layer itself (404 route, 413 body size).
std::string HttpErrorBody(std::string_view message, std::string_view type, std::string_view code);

}  // namespace dllm

#endif  // DLLM_SERVER_HTTP_HTTP_STATUS_MAPPING_H_
