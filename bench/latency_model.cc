#include "bench/latency_model.h"

#include <cmath>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace dllm::bench {

StepCost& StepCost::operator+=(const StepCost& o) {
  rows += o.rows;
  key_rows += o.key_rows;
  map_key_rows += o.map_key_rows;
  predicted_rows += o.predicted_rows;
  sequences += o.sequences;
  return *this;
}

namespace {

absl::Status Invalid(const std::string& message) {
  return absl::InvalidArgumentError(absl::StrCat("latency profile: ", message));
}

// A finite number >= 0 at `key`, or `fallback` when the key is absent.
absl::StatusOr<double> NonNegative(const nlohmann::json& j, const char* key, double fallback) {
  if (!j.contains(key)) return fallback;
  const nlohmann::json& v = j.at(key);
  if (!v.is_number()) return Invalid(absl::StrCat("\"", key, "\" must be a number"));
  const double x = v.get<double>();
  if (!std::isfinite(x) || x < 0) {
    return Invalid(absl::StrCat("\"", key, "\" must be finite and >= 0, not ", x));
  }
  return x;
}

}  // namespace

absl::StatusOr<LatencyModel> LatencyModel::Parse(absl::string_view json_text) {
  const nlohmann::json j = nlohmann::json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Invalid("not valid JSON");
  if (!j.is_object()) return Invalid("must be a JSON object");
  LatencyModel m;
  if (!j.contains("name") || !j["name"].is_string() || j["name"].get<std::string>().empty()) {
    return Invalid("\"name\" must be a non-empty string");
  }
  m.name_ = j["name"].get<std::string>();
  if (j.contains("source")) {
    if (!j["source"].is_string()) return Invalid("\"source\" must be a string");
    m.source_ = j["source"].get<std::string>();
  }
  if (!j.contains("rows_seconds") || !j["rows_seconds"].is_array() || j["rows_seconds"].empty()) {
    return Invalid("\"rows_seconds\" must be a non-empty array of [rows, seconds] pairs");
  }
  for (const nlohmann::json& knot : j["rows_seconds"]) {
    if (!knot.is_array() || knot.size() != 2 || !knot[0].is_number() || !knot[1].is_number()) {
      return Invalid(
          absl::StrCat("\"rows_seconds\": ", knot.dump(), " is not a [rows, seconds] pair"));
    }
    const double rows = knot[0].get<double>();
    const double seconds = knot[1].get<double>();
    if (!std::isfinite(rows) || !std::isfinite(seconds) || rows < 0 || seconds < 0) {
      return Invalid(absl::StrCat("\"rows_seconds\": ", knot.dump(), " must be finite and >= 0"));
    }
    if (!m.rows_seconds_.empty() && rows <= m.rows_seconds_.back().first) {
      return Invalid(absl::StrCat("\"rows_seconds\": rows must ascend (", rows, " after ",
                                  m.rows_seconds_.back().first, ")"));
    }
    m.rows_seconds_.emplace_back(rows, seconds);
  }
  const std::pair<const char*, double*> terms[] = {
      {"key_row_seconds", &m.key_row_seconds_},
      {"map_key_row_seconds", &m.map_key_row_seconds_},
      {"predicted_row_seconds", &m.predicted_row_seconds_},
      {"sequence_seconds", &m.sequence_seconds_},
  };
  for (const auto& [key, out] : terms) {
    absl::StatusOr<double> v = NonNegative(j, key, 0);
    if (!v.ok()) return v.status();
    *out = *v;
  }
  return m;
}

absl::StatusOr<LatencyModel> LatencyModel::FromFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read latency profile ", path));
  std::stringstream text;
  text << in.rdbuf();
  absl::StatusOr<LatencyModel> m = Parse(text.str());
  if (!m.ok()) return absl::InvalidArgumentError(absl::StrCat(path, ": ", m.status().message()));
  return m;
}

double LatencyModel::RowsSeconds(double rows) const {
  const auto& k = rows_seconds_;
  if (k.size() == 1 || rows <= k.front().first) return k.front().second;
  size_t i = 1;
  while (i + 1 < k.size() && rows > k[i].first) ++i;
  // Segment [i-1, i]; past the last knot, its line extended.
  const double slope = (k[i].second - k[i - 1].second) / (k[i].first - k[i - 1].first);
  return k[i - 1].second + slope * (rows - k[i - 1].first);
}

double LatencyModel::Seconds(const StepCost& cost) const {
  return RowsSeconds(cost.rows) + key_row_seconds_ * cost.key_rows +
         map_key_row_seconds_ * cost.map_key_rows + predicted_row_seconds_ * cost.predicted_rows +
         sequence_seconds_ * cost.sequences;
}

}  // namespace dllm::bench
