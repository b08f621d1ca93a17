// The one table of request fields: every field of DecodingParams and CacheParams, declared
// once (param_fields.cc) with its name, type, unit, domain, limit, default and a doc line.
//
// Every surface reads its field list from here instead of writing it again:
//   engine/core/params.cc   ValidateParamFields checks each field's domain from the table
//   server/                 the proto <-> params mapping (by field and enum value names), the
//                           HTTP "decoding"/"cache" objects, the YAML defaults, the playground's
//                           form (GET /v1/dllm/fields) and docs/api.md's field table
//   client/, bench/         dllm-client's flags and dllm-bench's setting specs
// The proto stays hand-written (it is the wire contract); tests/server/param_fields_proto_test.cc
// checks it against this table field by field. Adding a knob to a cache policy is one entry
// here (plus the member in params.h and its proto field); docs/layout.md has the recipe.
//
// Thread-safety: the table is built once, on first use, and immutable afterwards.
#ifndef DLLM_ENGINE_CORE_PARAM_FIELDS_H_
#define DLLM_ENGINE_CORE_PARAM_FIELDS_H_

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/core/params.h"

namespace dllm {

// The message a field lives in: "decoding" (DecodingParams, proto DecodingOptions) or "cache"
// (CacheParams, proto CacheOptions).
enum class ParamSection { kDecoding, kCache };
absl::string_view SectionName(ParamSection section);

enum class ParamType {
  kInt32,   // int
  kUint64,  // uint64_t
  kFloat,   // float (or std::optional<float>)
  kEnum,    // one of `choices`, named by the lower-case spelling of params.h
};

// One field's value: kInt32 and kEnum (the enum's integer value) as int64_t, kUint64 as
// uint64_t, kFloat as double (always exactly a float).
using ParamValue = std::variant<int64_t, uint64_t, double>;

struct ParamField {
  ParamSection section;
  // The one spelling of the field: proto field, HTTP JSON key, YAML key, playground field and
  // dllm-client flag (--name or --name-with-dashes).
  absl::string_view name;
  // A short spelling for command lines that are typed often: dllm-bench setting specs
  // ("entropy:tau=1,k=64") and dllm-client flags (--tau). Empty: none.
  absl::string_view alias;
  ParamType type;
  absl::string_view unit;  // "nats", "tokens", "steps", "positions"; empty: none
  // The domain. Infinite bounds are allowed; `lo_open`/`hi_open` exclude the bound itself.
  double lo = 0;
  double hi = 0;
  bool lo_open = false;
  bool hi_open = false;
  // The ParamLimits bound that narrows hi ("max_steps", the same key in the server's limits:
  // section); empty: none.
  absl::string_view limit;
  absl::string_view doc;                   // one line; docs/api.md and the playground show it
  std::vector<absl::string_view> choices;  // kEnum: the name of value i at index i
  // Unset is a value of its own (cache.shadow_sample_rate: the engine's configured rate).
  bool optional = false;
  // Which cache policies read it (cache fields only; empty: every policy). The playground
  // shows a knob only for them; nothing refuses the field for other policies.
  std::vector<CachePolicyKind> policies;
  // Which schedules read it (decoding fields only; empty: every schedule).
  std::vector<Schedule> schedules;

  // Accessors, filled by the table (param_fields.cc). get returns nullopt only for an unset
  // optional field.
  std::optional<ParamValue> (*get)(const DecodingParams&, const CacheParams&) = nullptr;
  void (*set)(const ParamValue&, DecodingParams*, CacheParams*) = nullptr;
  // The bound `limit` names, from a ParamLimits.
  double (*limit_of)(const ParamLimits&) = nullptr;
  // A rule beyond the domain, checked before it (the allowed cache policies; top_k against
  // the vocabulary; tau's NaN). Returns the reason, without the field name; empty: valid.
  std::string (*extra_check)(const ParamValue&, const ParamLimits&) = nullptr;
  // Read only by quota decoding, a fixed count of commits per step: the timestep schedule,
  // or the block and window schedules at confidence_threshold 0 (steps). Threshold decoding
  // commits by confidence and ignores it.
  bool quota_only = false;

  std::string FullName() const;  // "cache.entropy_threshold"
};

// Every field, decoding first, each section in its proto field order.
std::span<const ParamField> ParamFields();

// The field named `name` (or its alias) in `section`, or nullptr.
const ParamField* FindParamField(ParamSection section, absl::string_view name);
// "decoding.steps" / "cache.tau" (either spelling after the dot), or nullptr.
const ParamField* FindParamField(absl::string_view dotted_name);

// The field's value in params built by their default constructors (the engine's defaults;
// a model family's defaults may differ: ModelInfo::default_decoding / default_cache).
std::optional<ParamValue> DefaultParamValue(const ParamField& field);

// The decoding defaults of a caller that picks `schedule`, from `defaults` (a model's or an
// operator's): `defaults` itself when it is their schedule; otherwise `defaults` with
// `schedule`, and with every knob that several schedules read, `defaults`' among them
// (ParamField::schedules: confidence_threshold), back at DecodingParams' own value. Such a
// knob means something else under each schedule: the families' default is a tuned point of
// the window (16 masks at threshold 0.9), whose threshold would turn block decoding into
// parallel decoding and is refused by the timestep schedule. A knob of one schedule only
// (block_length, window) cannot mislead another and is kept.
DecodingParams DefaultsForSchedule(const DecodingParams& defaults, Schedule schedule);

// Reads `text` as a value of the field: decimal integers, floats as absl::SimpleAtof (inf,
// -inf), enums by name. INVALID_ARGUMENT "<field>: ..." (the dotted name) on bad text; no
// domain check (ValidateParamFields does that).
absl::StatusOr<ParamValue> ParseParamText(const ParamField& field, absl::string_view text);
// The value as ParseParamText reads it back: floats shortest-exact ("0.1", "inf"), enums by name.
std::string FormatParamValue(const ParamField& field, const ParamValue& value);
// The domain as text for docs and messages: "[0, 1]", "(0, 1]", "[1, limits.max_steps]",
// "any number but NaN"; enums as "block|timestep|window".
std::string DomainText(const ParamField& field);

// INVALID_ARGUMENT "<field>: <reason>" when `value` is outside the field's domain or limit,
// or fails its extra rule; the message names the configured limit when limits.section is set.
absl::Status CheckParamValue(const ParamField& field, const ParamValue& value,
                             const ParamLimits& limits);

// Converts a C++ value of a field's type to a ParamValue and back (enums via their integer).
template <typename T>
ParamValue ToParamValue(T value) {
  if constexpr (std::is_same_v<T, uint64_t>) {
    return value;
  } else if constexpr (std::is_floating_point_v<T>) {
    return static_cast<double>(value);
  } else {
    static_assert(std::is_enum_v<T> || std::is_integral_v<T>);
    return static_cast<int64_t>(value);  // int32 fields, and enums by their integer value
  }
}
template <typename T>
T FromParamValue(const ParamValue& value) {
  if constexpr (std::is_same_v<T, uint64_t>) {
    return std::get<uint64_t>(value);
  } else if constexpr (std::is_floating_point_v<T>) {
    return static_cast<T>(std::get<double>(value));
  } else {
    return static_cast<T>(std::get<int64_t>(value));  // int32 fields and enums
  }
}

// Fields given explicitly, each at most once (a later Set replaces an earlier one): the
// server's configured defaults, a bench setting spec, dllm-client's flags. Plain value.
class ParamOverrides {
 public:
  void Set(const ParamField& field, ParamValue value);
  // By dotted name; INVALID_ARGUMENT for an unknown name or a value of the wrong type.
  absl::Status Set(absl::string_view dotted_name, ParamValue value);
  template <typename T>
  absl::Status SetTo(absl::string_view dotted_name, T value) {
    return Set(dotted_name, ToParamValue(value));
  }

  const ParamValue* Find(const ParamField& field) const;
  // The value of the dotted name as T; nullopt when unset (or unknown).
  template <typename T>
  std::optional<T> Get(absl::string_view dotted_name) const {
    const ParamField* field = FindParamField(dotted_name);
    const ParamValue* value = field ? Find(*field) : nullptr;
    if (value == nullptr) return std::nullopt;
    return FromParamValue<T>(*value);
  }
  bool empty() const { return values_.empty(); }
  const std::vector<std::pair<const ParamField*, ParamValue>>& values() const { return values_; }

  // Writes every value into the params it belongs to. Giving decoding.schedule other than
  // `decoding`'s first moves `decoding` to DefaultsForSchedule (below), so that defaults tuned
  // for one schedule do not carry into another. Setting cache.entropy_threshold without
  // cache.entropy_threshold_under_load pins tau: the tau under load is cleared (never
  // switches), so a request, setting or config that names its tau gets exactly that tau.
  void ApplyTo(DecodingParams* decoding, CacheParams* cache) const;

  // INVALID_ARGUMENT naming the first given decoding field that the decoding `resolved`
  // describes does not read (ParamField::schedules, ParamField::quota_only), e.g.
  // block_length for a request that decodes with the window schedule, or steps under
  // threshold decoding: a knob that would be silently ignored is a caller's mistake. Requests
  // are checked; configured defaults are not (a default block_length serves the requests that
  // pick the block schedule).
  absl::Status CheckReadBy(const DecodingParams& resolved) const;

 private:
  std::vector<std::pair<const ParamField*, ParamValue>> values_;
};

}  // namespace dllm

#endif  // DLLM_ENGINE_CORE_PARAM_FIELDS_H_
