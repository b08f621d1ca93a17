// The request fields on the wire: engine/core/param_fields.h's table mapped onto the proto's
// DecodingOptions and CacheOptions by name, with no per-field code.
//
//   * each ParamField is the proto field of the same name in the message of its section;
//   * each engine enum value is the proto enum value named <PREFIX><NAME>, where PREFIX is the
//     UNSPECIFIED value's name without "UNSPECIFIED" (SCHEDULE_BLOCK for "block",
//     CACHE_POLICY_D2CACHE for "d2cache").
// tests/server/param_fields_proto_test.cc checks that every field and enum value has its twin.
// The server (request mapping, model info, HTTP) and dllm-client use it.
//
// Thread-safety: pure functions.
#ifndef DLLM_PROTO_PARAM_PROTO_H_
#define DLLM_PROTO_PARAM_PROTO_H_

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "dllm/v1/dllm.pb.h"
#include "engine/core/param_fields.h"

namespace dllm {

// The proto field of `field` (in DecodingOptions or CacheOptions), or nullptr if the proto
// has none (a defect the proto test reports).
const google::protobuf::FieldDescriptor* ProtoFieldOf(const ParamField& field);

// "SCHEDULE_BLOCK" -> "block": the engine's spelling of a proto enum value.
std::string EngineEnumName(const google::protobuf::EnumValueDescriptor& value);
// The proto value spelled `engine_name` in `type`, or nullptr (UNSPECIFIED is never returned).
const google::protobuf::EnumValueDescriptor* ProtoEnumValue(
    const google::protobuf::EnumDescriptor& type, absl::string_view engine_name);

// The value of `field` in the request's options: nullopt when unset (proto3 presence; an enum
// at UNSPECIFIED). INVALID_ARGUMENT "<field>: unknown value N" for an enum number the proto
// does not define.
absl::StatusOr<std::optional<ParamValue>> GetProtoParam(const ParamField& field,
                                                        const v1::DecodingOptions& decoding,
                                                        const v1::CacheOptions& cache);
// Sets `field` in the options (an enum value must be one of the field's choices).
void SetProtoParam(const ParamField& field, const ParamValue& value, v1::DecodingOptions* decoding,
                   v1::CacheOptions* cache);

// Every field set in the options, as overrides (the first error of GetProtoParam).
absl::StatusOr<ParamOverrides> ReadProtoParams(const v1::DecodingOptions& decoding,
                                               const v1::CacheOptions& cache);
// Every field of the params that has a value (all but an unset optional one).
void WriteProtoParams(const DecodingParams& params_decoding, const CacheParams& params_cache,
                      v1::DecodingOptions* decoding, v1::CacheOptions* cache);

}  // namespace dllm

#endif  // DLLM_PROTO_PARAM_PROTO_H_
