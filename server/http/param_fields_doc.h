// The request fields' table (engine/core/param_fields.h) for readers: as JSON, which the
// playground builds its form from (GET /v1/dllm/fields), and as the Markdown table of
// docs/api.md (tests/server/http/param_fields_doc_test.cc keeps the doc equal to it).
//
// Thread-safety: pure functions.
#ifndef DLLM_SERVER_HTTP_PARAM_FIELDS_DOC_H_
#define DLLM_SERVER_HTTP_PARAM_FIELDS_DOC_H_

#include <nlohmann/json.hpp>
#include <string>

namespace dllm {

// {"fields": [{"section", "name", "alias", "type" ("int32"|"uint64"|"float"|"enum"), "unit",
//   "domain" (DomainText), "min", "max" (null when infinite), "min_open", "max_open",
//   "limit" (the limits: key that narrows max, or ""), "doc", "choices", "default" (the
//   engine's; null when unset), "optional", "policies", "schedules"}, ...]}
nlohmann::json ParamFieldsJson();

// One Markdown table: field, type, unit, range, engine default, alias, applies to, meaning.
std::string ParamFieldsMarkdown();

}  // namespace dllm

#endif  // DLLM_SERVER_HTTP_PARAM_FIELDS_DOC_H_
