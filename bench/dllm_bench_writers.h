// dllm-bench's outputs: one JSON row per setting (stdout), the shadow-sample CSV
// (--shadow-out), and the sweep CSV with its gnuplot plot (--sweep). The JSON keys and CSV
// columns are read by bench/bench_table.py, tests/dllm_bench and docs/results/: change them
// only together.
//
// Formatting only: these functions read a setting's Result and write to streams the caller
// owns (PlotSweep alone opens a file and runs gnuplot). Thread-safety: none needed; the bench
// writes from its main thread.
#ifndef DLLM_BENCH_DLLM_BENCH_WRITERS_H_
#define DLLM_BENCH_DLLM_BENCH_WRITERS_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "bench/dllm_bench_spec.h"
#include "bench/entropy_cost.h"
#include "engine/engine.h"
#include "nlohmann/json.hpp"

namespace dllm::bench {

// What one setting measured over all its tasks.
struct Result {
  double accuracy = 0;
  std::map<std::string, std::pair<int, int>> by_family;  // family -> (correct, tasks)
  double tokens_per_s = 0;
  double wall_s = 0;
  double cpu_s = 0;  // process CPU seconds (all threads) over the same interval as wall_s
  double full_step_ratio = 0;
  double rows_per_step = 0;
  double decision_overhead_frac = 0;
  double steps = 0;  // mean per request
  double mean_committed_entropy = 0;
  double steps_per_token = 0;
  double full_step_seconds = 0;     // engine step time of steps with a full refresh
  double partial_step_seconds = 0;  // ... and of the other steps
  int64_t engine_full_steps = 0;
  int64_t engine_partial_steps = 0;
  int64_t tokens = 0;
  int errors = 0;
  std::string rejected;        // Submit's error when the setting is invalid for this model
  int64_t total_steps = 0;     // over all requests
  double decision_s = 0;       // the policies' Plan + Observe time, summed over requests
  int64_t predicted_rows = 0;  // rows whose statistics (entropy included) were computed
  int64_t rows_computed = 0;   // query rows of every step (SequenceStats::rows_computed)
  double macs = 0;             // multiply-adds of those rows (ModelInfo's cost shape)
  // Decoding dynamics: every committed token's entropy, and every step's max committed
  // entropy (0 for a step that committed nothing), over all requests.
  std::vector<float> committed_entropies;
  std::vector<float> step_max_entropies;
  // Per task, in task order, for the paired comparison with the baseline: the answer text
  // (empty for a failed request) and whether it was scored correct.
  std::vector<std::string> answers;
  std::vector<bool> correct;
};

// `x` rounded to `digits` decimals, as every figure of a JSON row is.
double Round(double x, int digits);

// What every row of a run shares.
struct RowContext {
  const ModelInfo& info;
  size_t n_tasks;
  int gen_length;
  int batch;
  const EntropyCost& entropy_cost;  // charged to EntropyCache's decision
};

// A setting's row: the setting, accuracy, speed, step-time split, decision cost and decoding
// dynamics. The caller adds the comparisons (speedup_vs_*, vs_baseline, shadow).
nlohmann::json RowJson(const RowContext& ctx, const Setting& setting, const Result& r);

// The row of a setting the engine rejected: the setting and Submit's error.
nlohmann::json RejectedRowJson(const Setting& setting, const std::string& error);

// Paired answer changes of `r` against the baseline's on the same tasks ("vs_baseline").
nlohmann::json PairedJson(const Result& r, const Result& base);

// Summary of a setting's shadow samples (the same figures as the dllm_cache_shadow_* metrics).
// time_fraction: shadow time / the rest of the setting's wall time (wall_s), its throughput cost.
nlohmann::json ShadowJson(const std::vector<ShadowSample>& samples, double rate, double wall_s);

// --shadow-out: the header, then one line per sample.
void WriteShadowCsvHeader(std::ostream& csv);
void WriteShadowCsvRows(std::ostream& csv, const Setting& setting,
                        const std::vector<ShadowSample>& samples);

// The sweep CSV's data rows of each decoding (0-based, contiguous): one plotted series each.
struct SweepSeries {
  std::string decoding;
  int first_row = 0, rows = 0;
};

// One sweep setting's CSV line. shadow: the row's "shadow" object, null without shadows
// (the cache-quality cells stay empty then).
struct SweepRow {
  const Setting& setting;
  const Result& r;
  double speedup_vs_none;
  double speedup_vs_baseline;
  const nlohmann::json& shadow;
};

void WriteSweepCsvHeader(std::ostream& csv);
// Appends the row and counts it in `series` (a new series when the decoding changes).
void WriteSweepCsvRow(std::ostream& csv, const SweepRow& row, std::vector<SweepSeries>* series);

// Writes PREFIX.gp (accuracy against speedup_vs_baseline, one line per series, tau labels)
// and runs gnuplot on it for PREFIX.png; reports on stderr (a failed gnuplot keeps the CSV).
void PlotSweep(const std::string& prefix, const std::string& baseline_spec,
               const std::vector<SweepSeries>& series);

}  // namespace dllm::bench

#endif  // DLLM_BENCH_DLLM_BENCH_WRITERS_H_
