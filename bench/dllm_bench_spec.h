// dllm-bench's inputs: the command line (BenchOptions), the task file, and the settings that
// the --policy, --decoding, --baseline and --sweep specs name (their syntax is documented at
// the top of bench/dllm_bench.cc).
//
// Bad input ends the program: Die prints "dllm-bench: MESSAGE" on stderr and exits 2 (no
// destructors run), and every parser here calls it on the first bad value, so the order of
// the calls in Main decides which error a command line with several gets.
//
// Thread-safety: none needed; everything runs on the bench's main thread. Values are returned
// by value and own their data.
#ifndef DLLM_BENCH_DLLM_BENCH_SPEC_H_
#define DLLM_BENCH_DLLM_BENCH_SPEC_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/engine.h"

namespace dllm::bench {

// dllm-bench's command line (see the top of bench/dllm_bench.cc).
struct BenchOptions {
  bool help = false;
  std::string model_dir, tasks_path, sweep, sweep_out, backend, baseline_spec;
  std::vector<std::string> policies, decodings;
  int limit = 0, batch = 0, threads = 0, gen_length = 0;  // gen_length 0: the model's default
  double shadow = 0;                                      // < 0: no --shadow
  double shadow_budget = 0;
  std::string shadow_out;
  std::string autotune;       // BUDGET[:WINDOW]; empty: off
  bool add_none = true;       // --none: `none` first in every decoding
  std::string answers_out;    // JSONL of rows with their per-task answers; empty: none
  std::string baseline_from;  // an answers_out file: its first line is the baseline
};

// Sets the flags from `args` (argv without the program name) and reads them once.
// INVALID_ARGUMENT naming the flag for unknown flags, missing or bad values.
absl::StatusOr<BenchOptions> ParseBenchOptions(const std::vector<std::string>& args);

// The checks on the option values that need no model, and --autotune parsed (disabled when
// not given). Dies on the first failure.
TauAutotuneOptions CheckBenchOptions(const BenchOptions& o);

[[noreturn]] void Die(const std::string& message);

// One piece of a task's seeded answer canvas (the task file's "canvas": a list of
// {"fixed": TEXT} and {"masks_for": TEXT} objects): TEXT's tokens held fixed, or as many masks
// as TEXT has tokens, so that a piece of the reference answer keeps its place whatever the
// model's tokenizer. Masks fill the canvas after the last piece.
struct CanvasPiece {
  bool fixed = false;
  std::string text;
};

struct Task {
  std::string prompt;
  std::string answer;
  std::string final;   // non-empty: score the "#### " line against it (long-form tasks)
  std::string family;  // non-empty: also counted in the row's accuracy_by_family
  std::vector<CanvasPiece> canvas;  // empty: an all-mask canvas
};

// The JSONL task file's tasks, the first `limit` of them when limit > 0. Dies when the file
// cannot be read, a line is not a task, or there is no task.
std::vector<Task> ReadTasks(const std::string& path, int limit);

// The answer canvas of `task` as token ids (GenerationRequest::canvas), `gen_length` long, or
// empty for a task without "canvas". An error names the task when its pieces do not fit.
absl::StatusOr<std::vector<int32_t>> CanvasIds(const Task& task, const Tokenizer& tokenizer,
                                               int32_t mask_token_id, int gen_length);

// Whether `text` answers `task`: its "#### " line against "final", else the whole answer
// (both trimmed).
bool Correct(const Task& task, const std::string& text);

struct Setting {
  std::string decoding_spec;
  std::string policy_spec;
  DecodingParams decoding;
  CacheParams cache;
  std::optional<int> logprobs;  // GenerationRequest::logprobs (policy spec key logprobs=N)
};

// A decoding spec on top of the model's defaults; gen: the answer length.
DecodingParams ParseDecoding(const std::string& spec, const DecodingParams& defaults, int gen);

// A policy spec's cache parameters. Its key logprobs=N (not a cache field: a request field)
// goes to *logprobs when given, so the same policy runs with and without logprobs side by
// side; where logprobs is null the key is refused.
CacheParams ParsePolicy(const std::string& spec, std::optional<int>* logprobs = nullptr);

// --baseline: vanilla or DECODING_SPEC[@POLICY_SPEC].
Setting ParseBaseline(const std::string& spec, const ModelInfo& info, int gen_length);

// The --policy settings in command-line order, with `none` put first when add_none and none
// of them is `none` (the baseline of speedup_vs_none is the first setting).
struct Policies {
  std::vector<CacheParams> caches;
  std::vector<std::string> specs;            // per cache, the spec that named it
  std::vector<std::optional<int>> logprobs;  // per cache, its spec's logprobs=N
};
Policies ParsePolicies(const std::vector<std::string>& specs, bool add_none);

// --sweep's thresholds (empty when not given).
std::vector<double> ParseSweepTaus(const std::string& sweep);

// The settings run for one --decoding (empty spec: the model's default decoding, its block
// cut to gen_length): every policy, then an EntropyCache setting per sweep tau (k from the
// first entropy policy, else 32).
std::vector<Setting> DecodingSettings(const std::string& decoding_spec, const ModelInfo& info,
                                      int gen_length, const Policies& policies,
                                      const std::vector<double>& sweep_taus);

}  // namespace dllm::bench

#endif  // DLLM_BENCH_DLLM_BENCH_SPEC_H_
