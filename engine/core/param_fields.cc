#include "engine/core/param_fields.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/core/shortest_decimal.h"

namespace dllm {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// The class and type of a pointer to data member, so that one template reads and writes
// either params struct.
template <auto M>
struct Member;
template <typename C, typename T, T C::*M>
struct Member<M> {
  using Class = C;
  using Type = T;
};

template <typename T>
struct IsOptional : std::false_type {};
template <typename T>
struct IsOptional<std::optional<T>> : std::true_type {};

template <typename T>
constexpr ParamType TypeOf() {
  if constexpr (IsOptional<T>::value) {
    return TypeOf<typename T::value_type>();
  } else if constexpr (std::is_enum_v<T>) {
    return ParamType::kEnum;
  } else if constexpr (std::is_same_v<T, uint64_t>) {
    return ParamType::kUint64;
  } else if constexpr (std::is_same_v<T, float>) {
    return ParamType::kFloat;
  } else {
    static_assert(std::is_same_v<T, int>, "a request field is int, uint64_t, float or an enum");
    return ParamType::kInt32;
  }
}

template <auto M>
const auto& Of(const DecodingParams& d, const CacheParams& c) {
  if constexpr (std::is_same_v<typename Member<M>::Class, DecodingParams>) {
    return d.*M;
  } else {
    return c.*M;
  }
}

template <auto M>
std::optional<ParamValue> Get(const DecodingParams& d, const CacheParams& c) {
  using T = typename Member<M>::Type;
  const T& v = Of<M>(d, c);
  if constexpr (IsOptional<T>::value) {
    if (!v) return std::nullopt;
    return ToParamValue(*v);
  } else {
    return ToParamValue(v);
  }
}

template <auto M>
void Set(const ParamValue& value, DecodingParams* d, CacheParams* c) {
  using T = typename Member<M>::Type;
  auto& target = [&]() -> T& {
    if constexpr (std::is_same_v<typename Member<M>::Class, DecodingParams>) {
      return d->*M;
    } else {
      return c->*M;
    }
  }();
  if constexpr (IsOptional<T>::value) {
    target = FromParamValue<typename T::value_type>(value);
  } else {
    target = FromParamValue<T>(value);
  }
}

// What a table row says beyond its member: names, domain and doc.
struct Row {
  absl::string_view name = {};
  absl::string_view alias = {};
  absl::string_view unit = {};
  double lo = 0;
  double hi = 0;
  bool lo_open = false;
  bool hi_open = false;
  absl::string_view doc = {};
};

template <auto M>
ParamField Field(const Row& row) {
  using C = typename Member<M>::Class;
  using T = typename Member<M>::Type;
  ParamField f;
  f.section = std::is_same_v<C, DecodingParams> ? ParamSection::kDecoding : ParamSection::kCache;
  f.name = row.name;
  f.alias = row.alias;
  f.type = TypeOf<T>();
  f.unit = row.unit;
  f.lo = row.lo;
  f.hi = row.hi;
  f.lo_open = row.lo_open;
  f.hi_open = row.hi_open;
  f.doc = row.doc;
  f.optional = IsOptional<T>::value;
  f.get = &Get<M>;
  f.set = &Set<M>;
  return f;
}

template <typename E, size_t N>
std::vector<absl::string_view> NamesOf(const std::array<E, N>& values) {
  std::vector<absl::string_view> names;
  for (size_t i = 0; i < N; ++i) {
    // Index i names value i: the kAll* arrays list each enum in declaration order from 0.
    names.emplace_back(Name(static_cast<E>(i)));
  }
  return names;
}

ParamField WithLimit(ParamField f, absl::string_view limit, double (*of)(const ParamLimits&)) {
  f.limit = limit;
  f.limit_of = of;
  return f;
}

ParamField ForPolicies(ParamField f, std::vector<CachePolicyKind> policies) {
  f.policies = std::move(policies);
  return f;
}

ParamField ForSchedules(ParamField f, std::vector<Schedule> schedules) {
  f.schedules = std::move(schedules);
  return f;
}

std::string PolicyAllowed(const ParamValue& value, const ParamLimits& limits) {
  const auto policy = FromParamValue<CachePolicyKind>(value);
  for (CachePolicyKind a : limits.allowed_cache_policies) {
    if (a == policy) return "";
  }
  return absl::StrCat("'", Name(policy), "' is not in ",
                      limits.section.empty()
                          ? "the allowed cache policies"
                          : absl::StrCat(limits.section, ".allowed_cache_policies"));
}

std::string TopKInVocabulary(const ParamValue& value, const ParamLimits& limits) {
  const int64_t k = std::get<int64_t>(value);
  if (limits.vocab_size > 0 && k > limits.vocab_size) {
    return absl::StrCat(k, " exceeds the vocabulary size (", limits.vocab_size, ")");
  }
  return "";
}

std::string TauNotNan(const ParamValue& value, const ParamLimits&) {
  if (std::isnan(std::get<double>(value))) {
    return "must not be NaN (a negative tau means every step full, +inf never)";
  }
  return "";
}

// The table in four parts, in the proto's field order: the unmasking schedule, token
// sampling, the cache policy with EntropyCache's knobs, and the baselines' knobs.
void AddScheduleRows(std::vector<ParamField>* t) {
  using D = DecodingParams;
  {
    ParamField f = Field<&D::schedule>(
        {.name = "schedule", .doc = "which answer positions get unmasked at each step"});
    f.choices = NamesOf(kAllSchedules);
    t->push_back(std::move(f));
  }
  {
    ParamField f =
        Field<&D::remasking>({.name = "remasking",
                              .alias = "alg",
                              .doc = "how candidate positions are ranked for unmasking"});
    f.choices = NamesOf(kAllRemaskings);
    t->push_back(std::move(f));
  }
  t->push_back(WithLimit(
      Field<&D::steps>({.name = "steps",
                        .unit = "steps",
                        .lo = 0,
                        .hi = kInf,
                        .doc = "total denoising steps of the quota schedules; 0: one per answer "
                               "token"}),
      "max_steps", [](const ParamLimits& l) -> double { return l.max_steps; }));
  t->back().quota_only = true;
  t->push_back(ForSchedules(
      WithLimit(Field<&D::block_length>(
                    {.name = "block_length",
                     .alias = "b",
                     .unit = "tokens",
                     .lo = 1,
                     .hi = kInf,
                     .doc = "block schedule: block size; divides max_new_tokens (unset: the "
                            "default, shortened to max_new_tokens when longer)"}),
                "max_block_length",
                [](const ParamLimits& l) -> double { return l.max_block_length; }),
      {Schedule::kBlock}));
  t->push_back(ForSchedules(
      WithLimit(Field<&D::window>({.name = "window",
                                   .alias = "w",
                                   .unit = "tokens",
                                   .lo = 1,
                                   .hi = kInf,
                                   .doc = "window schedule: masks in the denoising window"}),
                "max_window", [](const ParamLimits& l) -> double { return l.max_window; }),
      {Schedule::kWindow}));
  t->push_back(ForSchedules(
      Field<&D::confidence_threshold>(
          {.name = "confidence_threshold",
           .alias = "threshold",
           .lo = 0,
           .hi = 1,
           .doc = "> 0: commit every candidate at least this confident, at least one per step "
                  "(Fast-dLLM parallel decoding); 0: a fixed quota per step"}),
      {Schedule::kBlock, Schedule::kWindow}));
}

void AddSamplingRows(std::vector<ParamField>* t) {
  using D = DecodingParams;
  t->push_back(WithLimit(
      Field<&D::temperature>({.name = "temperature",
                              .lo = 0,
                              .hi = kInf,
                              .doc = "token sampling temperature; 0: greedy (argmax)"}),
      "max_temperature", [](const ParamLimits& l) -> double { return l.max_temperature; }));
  {
    ParamField f = Field<&D::top_k>(
        {.name = "top_k", .lo = 0, .hi = 1 << 30, .doc = "top-k filter for sampling; 0: off"});
    f.extra_check = &TopKInVocabulary;
    t->push_back(std::move(f));
  }
  t->push_back(Field<&D::top_p>({.name = "top_p",
                                 .lo = 0,
                                 .hi = 1,
                                 .lo_open = true,
                                 .doc = "nucleus filter for sampling; 1: off"}));
  t->push_back(Field<&D::seed>({.name = "seed",
                                .lo = 0,
                                .hi = static_cast<double>(std::numeric_limits<uint64_t>::max()),
                                .doc = "sampling seed; results never depend on the batch"}));
  t->push_back(ForSchedules(Field<&D::eps>({.name = "eps",
                                            .lo = 0,
                                            .hi = 1,
                                            .lo_open = true,
                                            .hi_open = true,
                                            .doc = "timestep schedule: the final timestep"}),
                            {Schedule::kTimestep}));
  t->push_back(
      ForSchedules(Field<&D::alg_temp>({.name = "alg_temp",
                                        .lo = 0,
                                        .hi = 100,
                                        .doc = "timestep schedule: > 0 samples positions from "
                                               "softmax(confidence / alg_temp)"}),
                   {Schedule::kTimestep}));
  t->push_back(WithLimit(
      Field<&D::max_denoising_steps>(
          {.name = "max_denoising_steps",
           .unit = "steps",
           .lo = 0,
           .hi = kInf,
           .doc = "cap on the denoising steps under every schedule: the last allowed step "
                  "commits every mask left (finish reason step_limit); 0: no cap"}),
      "max_steps", [](const ParamLimits& l) -> double { return l.max_steps; }));
}

void AddCacheRows(std::vector<ParamField>* t) {
  using K = CacheParams;
  using P = CachePolicyKind;
  const std::vector<P> entropy_like = {P::kEntropy, P::kInterval};
  {
    ParamField f = Field<&K::policy>(
        {.name = "policy", .alias = "cache", .doc = "the approximate KV cache policy"});
    f.choices = NamesOf(kAllCachePolicies);
    f.extra_check = &PolicyAllowed;
    t->push_back(std::move(f));
  }
  {
    ParamField f = Field<&K::entropy_threshold>(
        {.name = "entropy_threshold",
         .alias = "tau",
         .unit = "nats",
         .lo = -kInf,
         .hi = kInf,
         .doc = "EntropyCache tau: a step whose max committed entropy exceeds it makes the next "
                "step full; negative: every step full, +inf: never on entropy"});
    f.extra_check = &TauNotNan;
    t->push_back(ForPolicies(std::move(f), {P::kEntropy}));
  }
  {
    ParamField f = Field<&K::entropy_threshold_under_load>(
        {.name = "entropy_threshold_under_load",
         .alias = "load_tau",
         .unit = "nats",
         .lo = -kInf,
         .hi = kInf,
         .doc = "EntropyCache tau from the step at which the request's deadline is at risk "
                "under load (usually above entropy_threshold: fewer refreshes); unset: never "
                "switches; a request that sets entropy_threshold alone keeps it"});
    f.extra_check = &TauNotNan;
    t->push_back(ForPolicies(std::move(f), {P::kEntropy}));
  }
  t->push_back(ForPolicies(
      Field<&K::recent_k>({.name = "recent_k",
                           .alias = "k",
                           .unit = "tokens",
                           .lo = 0,
                           .hi = 1 << 20,
                           .doc = "most recently committed tokens recomputed in partial steps"}),
      entropy_like));
  t->push_back(ForPolicies(
      Field<&K::recent_min_entropy>(
          {.name = "recent_min_entropy",
           .alias = "min_entropy",
           .unit = "nats",
           .lo = 0,
           .hi = kInf,
           .doc = "of the recent tokens committed before the last step, recompute only those "
                  "committed with at least this entropy; unset or 0: all (the paper)"}),
      entropy_like));
  t->push_back(ForPolicies(
      Field<&K::recent_max_end>(
          {.name = "recent_max_end",
           .alias = "max_end",
           .unit = "tokens",
           .lo = 0,
           .hi = 1 << 20,
           .doc = "of the recent tokens committed before the last step, recompute at most this "
                  "many end tokens (the newest); unset: all (the paper)"}),
      entropy_like));
  t->push_back(ForPolicies(
      WithLimit(Field<&K::refresh_interval>({.name = "refresh_interval",
                                             .alias = "n",
                                             .unit = "steps",
                                             .lo = 1,
                                             .hi = kInf,
                                             .doc = "interval policy: steps between full "
                                                    "refreshes"}),
                "max_steps", [](const ParamLimits& l) -> double { return l.max_steps; }),
      {P::kInterval}));
  t->push_back(
      WithLimit(Field<&K::shadow_sample_rate>(
                    {.name = "shadow_sample_rate",
                     .alias = "shadow",
                     .lo = 0,
                     .hi = 1,
                     .doc = "fraction of partial steps checked against a shadow full forward "
                            "(observability only); unset: the server's rate"}),
                "max_shadow_sample_rate",
                [](const ParamLimits& l) -> double { return l.max_shadow_sample_rate; }));
}

void AddBaselineRows(std::vector<ParamField>* t) {
  using K = CacheParams;
  using P = CachePolicyKind;
  t->push_back(ForPolicies(
      Field<&K::d2_current_k>({.name = "d2_current_k",
                               .alias = "current_k",
                               .unit = "tokens",
                               .lo = 1,
                               .hi = 1 << 20,
                               .doc = "d2Cache: masked rows recomputed per step, ranked by "
                                      "certainty density"}),
      {P::kD2Cache}));
  t->push_back(ForPolicies(
      Field<&K::d2_rollout_p>({.name = "d2_rollout_p",
                               .alias = "rollout_p",
                               .lo = 0,
                               .hi = 1,
                               .doc = "d2Cache: attention-rollout nucleus mass of the other "
                                      "tokens recomputed per step"}),
      {P::kD2Cache}));
  t->push_back(
      ForPolicies(Field<&K::d2_sigma>({.name = "d2_sigma",
                                       .alias = "sigma",
                                       .unit = "positions",
                                       .lo = 0,
                                       .hi = kInf,
                                       .lo_open = true,
                                       .hi_open = true,
                                       .doc = "d2Cache: width of the certainty-density Gaussian"}),
                  {P::kD2Cache}));
  t->push_back(ForPolicies(
      Field<&K::elastic_gamma>({.name = "elastic_gamma",
                                .alias = "gamma",
                                .lo = -1,
                                .hi = 1,
                                .doc = "Elastic-Cache: below this cosine similarity of a tracked "
                                       "token's attention between steps, the deeper layers are "
                                       "recomputed for every row"}),
      {P::kElastic}));
}

std::vector<ParamField> BuildTable() {
  std::vector<ParamField> t;
  AddScheduleRows(&t);
  AddSamplingRows(&t);
  AddCacheRows(&t);
  AddBaselineRows(&t);
  return t;
}

const std::vector<ParamField>& Table() {
  static const std::vector<ParamField>* const table = new std::vector<ParamField>(BuildTable());
  return *table;
}

std::string Bound(const ParamField& f, double x) {
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  if (f.type == ParamType::kFloat) return ShortestDecimal(static_cast<float>(x));
  if (f.type == ParamType::kUint64) return absl::StrCat(static_cast<uint64_t>(x));
  return absl::StrCat(static_cast<int64_t>(x));
}

std::string Interval(const ParamField& f, double lo, double hi, absl::string_view hi_text) {
  return absl::StrCat(f.lo_open ? "(" : "[", Bound(f, lo), ", ",
                      hi_text.empty() ? Bound(f, hi) : std::string(hi_text), f.hi_open ? ")" : "]");
}

// The value as a double for range checks (uint64 seeds lose bits, but their domain is all
// of uint64, so no check is affected).
double AsDouble(const ParamValue& v) {
  return std::visit([](auto x) { return static_cast<double>(x); }, v);
}

}  // namespace

absl::string_view SectionName(ParamSection section) {
  return section == ParamSection::kDecoding ? "decoding" : "cache";
}

std::string ParamField::FullName() const { return absl::StrCat(SectionName(section), ".", name); }

std::span<const ParamField> ParamFields() { return Table(); }

const ParamField* FindParamField(ParamSection section, absl::string_view name) {
  if (name.empty()) return nullptr;
  for (const ParamField& f : Table()) {
    if (f.section == section && (f.name == name || f.alias == name)) return &f;
  }
  return nullptr;
}

const ParamField* FindParamField(absl::string_view dotted_name) {
  const size_t dot = dotted_name.find('.');
  if (dot == absl::string_view::npos) return nullptr;
  const absl::string_view section = dotted_name.substr(0, dot);
  const absl::string_view name = dotted_name.substr(dot + 1);
  if (section == "decoding") return FindParamField(ParamSection::kDecoding, name);
  if (section == "cache") return FindParamField(ParamSection::kCache, name);
  return nullptr;
}

std::optional<ParamValue> DefaultParamValue(const ParamField& field) {
  return field.get(DecodingParams{}, CacheParams{});
}

absl::StatusOr<ParamValue> ParseParamText(const ParamField& f, absl::string_view text) {
  const auto bad = [&](absl::string_view what) {
    return absl::InvalidArgumentError(absl::StrCat(f.FullName(), ": '", text, "' is not ", what));
  };
  switch (f.type) {
    case ParamType::kInt32: {
      int32_t v = 0;
      if (!absl::SimpleAtoi(text, &v)) return bad("an integer");
      return ParamValue(int64_t{v});
    }
    case ParamType::kUint64: {
      uint64_t v = 0;
      if (!absl::SimpleAtoi(text, &v)) return bad("an integer >= 0");
      return ParamValue(v);
    }
    case ParamType::kFloat: {
      float v = 0;
      if (!absl::SimpleAtof(text, &v)) return bad("a number");
      return ParamValue(static_cast<double>(v));
    }
    case ParamType::kEnum:
      for (size_t i = 0; i < f.choices.size(); ++i) {
        if (f.choices[i] == text) return ParamValue(static_cast<int64_t>(i));
      }
      return absl::InvalidArgumentError(absl::StrCat(f.FullName(), ": unknown value '", text,
                                                     "' (expected ", DomainText(f), ")"));
  }
  return bad("a value");
}

std::string FormatParamValue(const ParamField& f, const ParamValue& value) {
  switch (f.type) {
    case ParamType::kEnum: {
      const int64_t i = std::get<int64_t>(value);
      return i >= 0 && static_cast<size_t>(i) < f.choices.size() ? std::string(f.choices[i]) : "?";
    }
    case ParamType::kFloat: {
      const double v = std::get<double>(value);
      if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
      return ShortestDecimal(static_cast<float>(v));
    }
    case ParamType::kUint64:
      return absl::StrCat(std::get<uint64_t>(value));
    case ParamType::kInt32:
      return absl::StrCat(std::get<int64_t>(value));
  }
  return "?";
}

std::string DomainText(const ParamField& f) {
  if (f.type == ParamType::kEnum) return absl::StrJoin(f.choices, "|");
  if (std::isinf(f.lo) && std::isinf(f.hi)) return "any number but NaN";
  if (f.type == ParamType::kUint64) return "any 64-bit unsigned integer";
  const std::string hi = f.limit.empty() ? "" : absl::StrCat("limits.", f.limit);
  return Interval(f, f.lo, f.hi, hi);
}

absl::Status CheckParamValue(const ParamField& f, const ParamValue& value,
                             const ParamLimits& limits) {
  const auto invalid = [&](absl::string_view reason) {
    return absl::InvalidArgumentError(absl::StrCat(f.FullName(), ": ", reason));
  };
  if (f.extra_check != nullptr) {
    if (std::string reason = f.extra_check(value, limits); !reason.empty()) return invalid(reason);
  }
  if (f.type == ParamType::kEnum || f.type == ParamType::kUint64) return absl::OkStatus();
  const double v = AsDouble(value);
  double hi = f.hi;
  const bool limited = f.limit_of != nullptr;
  if (limited) hi = std::min(hi, f.limit_of(limits));
  const bool above_lo = f.lo_open ? v > f.lo : v >= f.lo;
  const bool below_hi = f.hi_open ? v < hi : v <= hi;
  if (above_lo && below_hi) return absl::OkStatus();
  const std::string shown = FormatParamValue(f, value);
  if (limited && !limits.section.empty() && v > hi) {
    return invalid(
        absl::StrCat(shown, " exceeds ", limits.section, ".", f.limit, " (", Bound(f, hi), ")"));
  }
  if (f.lo == 0 && f.lo_open && std::isinf(hi) && f.hi_open) {
    return invalid(absl::StrCat(shown, " must be positive and finite"));
  }
  return invalid(absl::StrCat(shown, " is outside ", Interval(f, f.lo, hi, "")));
}

void ParamOverrides::Set(const ParamField& field, ParamValue value) {
  for (auto& [f, v] : values_) {
    if (f == &field) {
      v = value;
      return;
    }
  }
  values_.emplace_back(&field, value);
}

absl::Status ParamOverrides::Set(absl::string_view dotted_name, ParamValue value) {
  const ParamField* field = FindParamField(dotted_name);
  if (field == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(dotted_name, ": unknown field"));
  }
  const bool type_ok = field->type == ParamType::kFloat    ? value.index() == 2
                       : field->type == ParamType::kUint64 ? value.index() == 1
                                                           : value.index() == 0;
  if (!type_ok) {
    return absl::InvalidArgumentError(absl::StrCat(dotted_name, ": a value of the wrong type"));
  }
  Set(*field, value);
  return absl::OkStatus();
}

const ParamValue* ParamOverrides::Find(const ParamField& field) const {
  for (const auto& [f, v] : values_) {
    if (f == &field) return &v;
  }
  return nullptr;
}

namespace {

bool Reads(const ParamField& f, Schedule schedule) {
  return f.schedules.empty() ||
         std::find(f.schedules.begin(), f.schedules.end(), schedule) != f.schedules.end();
}

// "the block schedule reads", "the block and window schedules read".
std::string ScheduleReaders(const std::vector<Schedule>& schedules) {
  std::vector<std::string> names;
  names.reserve(schedules.size());
  for (Schedule s : schedules) names.emplace_back(Name(s));
  return absl::StrCat("the ", absl::StrJoin(names, " and "),
                      schedules.size() > 1 ? " schedules read" : " schedule reads");
}

}  // namespace

DecodingParams DefaultsForSchedule(const DecodingParams& defaults, Schedule schedule) {
  if (schedule == defaults.schedule) return defaults;
  DecodingParams out = defaults;
  const DecodingParams plain;
  CacheParams unused;
  for (const ParamField& f : ParamFields()) {
    // Only knobs that several schedules read, and the defaults' schedule among them: a
    // knob of one schedule alone (block_length, window) cannot mislead another and stays.
    if (f.section != ParamSection::kDecoding || f.schedules.size() < 2 ||
        !Reads(f, defaults.schedule)) {
      continue;
    }
    f.set(*f.get(plain, unused), &out, &unused);
  }
  out.schedule = schedule;
  return out;
}

absl::Status ParamOverrides::CheckReadBy(const DecodingParams& resolved) const {
  const bool threshold_decoding = UsesThresholdDecoding(resolved);
  for (const auto& [f, v] : values_) {
    if (f->section != ParamSection::kDecoding) continue;
    if (f->quota_only && threshold_decoding) {
      return absl::InvalidArgumentError(absl::StrCat(
          f->FullName(),
          ": threshold decoding (decoding.confidence_threshold > 0) commits by confidence and "
          "does not read it; set confidence_threshold 0 for a fixed quota per step"));
    }
    if (!Reads(*f, resolved.schedule)) {
      return absl::InvalidArgumentError(
          absl::StrCat(f->FullName(), ": ", ScheduleReaders(f->schedules),
                       " it, and this request decodes with the ", Name(resolved.schedule),
                       " schedule; set decoding.schedule, or leave the field unset"));
    }
  }
  return absl::OkStatus();
}

void ParamOverrides::ApplyTo(DecodingParams* decoding, CacheParams* cache) const {
  // Looked up once: ApplyTo runs for every request.
  static const ParamField* const schedule = FindParamField(ParamSection::kDecoding, "schedule");
  if (const ParamValue* s = Find(*schedule); s != nullptr) {
    *decoding = DefaultsForSchedule(*decoding, FromParamValue<Schedule>(*s));
  }
  for (const auto& [f, v] : values_) f->set(v, decoding, cache);
  static const ParamField* const tau = FindParamField(ParamSection::kCache, "entropy_threshold");
  static const ParamField* const tau_under_load =
      FindParamField(ParamSection::kCache, "entropy_threshold_under_load");
  if (Find(*tau) != nullptr && Find(*tau_under_load) == nullptr) {
    cache->entropy_threshold_under_load.reset();
  }
}

}  // namespace dllm
