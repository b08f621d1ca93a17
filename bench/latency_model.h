// LatencyModel: the time one batched decoding step takes on some machine, as a function of
// what the step computes. The serving simulator (serve_sim.cc) advances its virtual clock by
// it, so the real scheduler runs in the time that machine would take.
//
//   seconds = rows_curve(rows) + key_row_seconds * key_rows + map_key_row_seconds * map_key_rows
//             + predicted_row_seconds * predicted_rows + sequence_seconds * sequences
//
// rows_curve is piecewise linear through its knots (ascending rows): below the first knot it
// stays at the first knot's time (a GPU's fixed cost of a forward), beyond the last it goes on
// with the last segment's slope. The other terms are linear. A profile is a JSON file:
//
//   {"name": "...", "source": "who measured it, where, how",
//    "rows_seconds": [[32, 0.0122], [512, 0.0165], ...],
//    "key_row_seconds": 0, "map_key_row_seconds": 0, "predicted_row_seconds": 0,
//    "sequence_seconds": 0}
//
// Only "name" and "rows_seconds" are required. docs/serving-simulation.md describes the two
// shipped profiles (bench/profiles/).
//
// Thread-safety: immutable after Parse; Seconds may be called from any thread.
#ifndef DLLM_BENCH_LATENCY_MODEL_H_
#define DLLM_BENCH_LATENCY_MODEL_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace dllm::bench {

// What one step computes, summed over its forward passes and its sequences.
struct StepCost {
  // Query rows, each weighted by the share of the layers it runs through (a pass that starts
  // at layer f of L counts (L - f) / L per row).
  double rows = 0;
  double key_rows = 0;        // sum of query rows x positions attended (same layer weighting)
  double map_key_rows = 0;    // the same, of passes that also write attention maps
  double predicted_rows = 0;  // rows whose vocabulary statistics the LM head computes
  int sequences = 0;

  StepCost& operator+=(const StepCost& o);
};

class LatencyModel {
 public:
  // INVALID_ARGUMENT naming the problem: not JSON, a missing or empty "rows_seconds", knots
  // not ascending in rows, a negative or non-finite number.
  static absl::StatusOr<LatencyModel> Parse(absl::string_view json_text);
  // Parse of the file's text; NOT_FOUND naming the path when it cannot be read.
  static absl::StatusOr<LatencyModel> FromFile(const std::string& path);

  double Seconds(const StepCost& cost) const;
  // rows_curve alone.
  double RowsSeconds(double rows) const;

  const std::string& name() const { return name_; }
  const std::string& source() const { return source_; }

 private:
  std::string name_, source_;
  std::vector<std::pair<double, double>> rows_seconds_;  // ascending rows, at least one knot
  double key_row_seconds_ = 0;
  double map_key_row_seconds_ = 0;
  double predicted_row_seconds_ = 0;
  double sequence_seconds_ = 0;
};

}  // namespace dllm::bench

#endif  // DLLM_BENCH_LATENCY_MODEL_H_
