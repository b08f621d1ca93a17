// The limits: section's numeric bounds as one table.
//
// The YAML reader, the validator, ToParamLimits and GetModelInfo's Limits message all walk
// this table, so a new bound is one row here plus its LimitsSection member (and, when a
// request field is checked against it, the ParamLimits member and that field's row in
// engine/core/param_fields.cc). tests/server/limit_fields_test.cc checks the proto's Limits
// message against the rows, field by field. allowed_cache_policies, a list of enum names, is
// not a row; each of those places handles it after the rows.
//
// Thread-safety: the table is immutable.
#ifndef DLLM_SERVER_LIMIT_FIELDS_H_
#define DLLM_SERVER_LIMIT_FIELDS_H_

#include <cstdint>
#include <variant>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "engine/core/params.h"
#include "server/config.h"

namespace dllm {

struct LimitField {
  using Member =
      std::variant<int LimitsSection::*, int64_t LimitsSection::*, float LimitsSection::*>;
  // The engine's bound that this one sets (ToParamLimits), or none: the prompt bounds are
  // checked by the gateway before tokenizing, not by ValidateParams.
  using ParamMember = std::variant<std::monostate, int ParamLimits::*, float ParamLimits::*>;

  absl::string_view name;  // the key under limits: and the field of the proto's Limits message
  Member member;
  double min = 0;  // the range a configured value must be in, both ends included
  double max = 0;
  ParamMember param;
};

// Every row, in the order errors are checked and the proto's fields are numbered.
absl::Span<const LimitField> LimitFields();

// The row's value in `limits`, widened to double (every bound fits exactly).
double LimitValue(const LimitsSection& limits, const LimitField& field);

}  // namespace dllm

#endif  // DLLM_SERVER_LIMIT_FIELDS_H_
