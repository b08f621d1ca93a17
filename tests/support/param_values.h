// Test values for the request fields' table (engine/core/param_fields.h): for each field a
// value inside its domain (and inside the default limits but for shadow_sample_rate, whose
// server limit is 0.1) that differs from the engine default, so that a write through any
// surface shows in the params.
#ifndef DLLM_TESTS_SUPPORT_PARAM_VALUES_H_
#define DLLM_TESTS_SUPPORT_PARAM_VALUES_H_

#include <optional>

#include "engine/core/param_fields.h"

namespace dllm::testing {

// Enums: value 1 or 2; integers: 3 or 4; floats: 0.25 or 0.5; uint64: the largest value.
inline ParamValue SomeOtherValue(const ParamField& f) {
  const std::optional<ParamValue> d = DefaultParamValue(f);
  switch (f.type) {
    case ParamType::kEnum:
      return int64_t{d && std::get<int64_t>(*d) == 1 ? 2 : 1};
    case ParamType::kUint64:
      return uint64_t{0xFFFFFFFFFFFFFFFFull};
    case ParamType::kInt32:
      return int64_t{d && std::get<int64_t>(*d) == 3 ? 4 : 3};
    case ParamType::kFloat:
      return d && std::get<double>(*d) == 0.25 ? 0.5 : 0.25;
  }
  return int64_t{0};
}

}  // namespace dllm::testing

#endif  // DLLM_TESTS_SUPPORT_PARAM_VALUES_H_
