// dllm-bench: accuracy and speed of decoding modes and cache policies on a JSONL task file,
// driving the engine directly (no gRPC).
//
//   dllm-bench --model DIR --tasks FILE.jsonl [--policy SPEC]... [--decoding SPEC]...
//              [--limit N] [--batch N] [--threads N] [--gen-length G] [--backend cpu|cuda]
//              [--sweep tau=a:b:n|tau=t1,t2,... [--sweep-out PREFIX]] [--baseline SETTING]
//              [--shadow RATE [--shadow-budget F] [--shadow-out FILE.csv]
//               [--autotune BUDGET[:WINDOW]]] [--answers-out FILE] [--baseline-from FILE]
//              [--none=false]
//
// Policy specs: none | entropy[:tau=0.5,k=32] | dual | prefix | interval[:n=8,k=32] |
// d2cache[:current_k=32,rollout_p=0.1,sigma=10] | elastic[:gamma=0.9]; any may
// add shadow=RATE, that setting's own shadow sample rate (e.g. the same policy with and
// without shadows, side by side in one run: what shadow sampling costs), and logprobs=N, the
// requests' logprobs with N alternatives (what logprobs cost, the same way).
// Decoding specs: block[:block_length=32,steps=S,threshold=0.9,remasking=low_confidence]
//                 window[:w=16,threshold=0.9,steps=S]
//                 timestep[:alg=entropy,steps=S,eps=1e-3,alg_temp=0]
// (common keys: temperature, seed; default: the model family's defaults).
// The keys are the request fields of engine/core/param_fields.h (cache.* in policy specs,
// decoding.* in decoding specs), by name or by alias: every field of the table works here,
// e.g. entropy:entropy_threshold=1 or d2cache:d2_rollout_p=0.05.
// --gen-length defaults to the model's answer length (generation_config.json, else 64).
//
// --batch N lets the engine step up to N requests together (all tasks are queued at once).
// Each task {"prompt", "answer"} is rendered through the model's chat template as one user
// message. For every (decoding, policy) setting the same prompts run through one engine, and
// one JSON object per setting is printed on its own line. The `none` policy always runs first
// (added if not requested) as the baseline of speedup_vs_none. Accuracy is exact match after
// trimming whitespace of the answer cut at the first end token. tokens_per_s counts answer
// tokens before the first end token over the setting's wall time.
//
// --baseline SETTING is measured first in the same run (after the warm-up) and every row
// reports speedup_vs_baseline against it, and "vs_baseline": the paired answer changes on the
// same tasks (changed texts, gained and lost correct answers, the accuracy difference and its
// paired standard error). SETTING = vanilla (the default: the paper's
// baseline, block decoding in blocks of min(32, G), one token per step, low_confidence for
// LLaDA / maskgit_plus for Dream, no cache) or DECODING_SPEC[@POLICY_SPEC] (policy default
// none), e.g. block:block_length=32,threshold=0.9@dual.
//
// Costs that a shared machine does not distort: every row reports cpu_s (process CPU seconds,
// all threads, over the setting's wall_s), cpu_s_per_token, rows_per_token (query rows
// computed per answer token) and macs_per_token (multiply-adds of those rows, from the model's
// shapes: ModelInfo::row_macs), and speedup_vs_baseline_cpu beside the wall-time
// speedup_vs_baseline. The speed-ups to quote are the CPU-time ones; wall/CPU far from the
// run's median flags a setting that shared its cores (bench/bench_table.py marks it).
//
// --answers-out FILE writes each row again with its per-task answers and scores, baseline
// first. --baseline-from FILE reuses such a file's baseline (same tasks, model and answer
// length) instead of running it: an expensive baseline (vanilla on 500 items) is measured once
// and every later run pairs against it. --none=false runs `none` only where a --policy names it
// (with no --policy: the baseline alone, e.g. to store it).
//
// Rows also report steps_per_token (denoising steps per generated answer token),
// rows_per_step, full_step_ratio and the time split between full and partial steps
// (engine step wall time; with --batch > 1 a step counts as full when any sequence in it
// refreshed fully), and "dynamics": tokens_per_forward (tokens committed per step, end
// tokens included), mean_token_entropy, committed_entropy_hist (fractions of committed tokens
// per entropy bin, nats) and step_max_entropy (mean, p50, p90 and frac_above_0.5 of each
// step's max committed entropy, 0 for a step that commits nothing), to set a model's decoding
// against published figures for real dLLMs.
//
// decision_overhead_frac is the policy's decision time over wall time. For EntropyCache it
// includes the entropy term of the LM head's row statistics (computed for every predicted
// row), charged at the ns per row measured on this CPU at startup (bench/entropy_cost.h;
// decision_cost splits the two).
//
// Tasks with a "final" field (the long-form suite, tools/tasks/longform.py) are scored on the
// answer's last line starting with "#### " (its text must equal "final"); others on the
// whole answer. Tasks with a "family" field are also scored per family (accuracy_by_family).
// A task with a "canvas" field (a list of {"fixed": TEXT} and {"masks_for": TEXT}) decodes
// from a seeded canvas: TEXT's tokens held fixed, or as many masks as TEXT has tokens, then
// masks to the answer length (infilling; tools/tasks/infill.py writes such files). The
// answer scored includes the fixed text.
//
// --sweep tau=a:b:n (or tau=t1,t2,... for an explicit list) additionally runs the entropy
// policy at n thresholds from a to b (k from the first entropy --policy, else 32) and writes
// PREFIX.csv and, through gnuplot, PREFIX.png (accuracy against speedup). With --shadow the
// CSV also carries each threshold's decision-mismatch rate, mean KL, mean K/V drift per region
// and token-mismatch rate.
//
// --shadow RATE checks that fraction of every setting's partial steps against a shadow full
// forward (cache.shadow_sample_rate per request) and adds a "shadow" object per setting:
// samples, mean KL(full || partial), decision- and token-mismatch rates (ShadowSample),
// mean max committed-probability change,
// mean K/V drift per region, the shadow time and time_fraction (shadow time / the rest of
// the setting's wall time: the throughput it cost). --shadow-budget F caps that fraction
// (the engine's shadow.max_time_fraction; default: no cap, the server's default is 0.02):
// drawn shadows are skipped while earlier ones used up the budget. The engine skips shadows while
// requests queue, so with --shadow the bench keeps at most --batch requests in flight (it submits
// the next as the oldest finishes) for every setting alike. --shadow-out writes one CSV line per
// sample (setting, request, step, E, KL, both mismatches, drifts) for offline analysis
// (docs/entropy-drift.md).
//
// --autotune BUDGET[:WINDOW] turns on the engine's tau autotuner (cache.autotune: scale every
// EntropyCache tau to keep the shadow token-mismatch rate under BUDGET, deciding from
// WINDOW samples on, default 20; engine/scheduler/shadow/tau_controller.h) with --shadow as
// the engine's sample rate. The controller is the engine's, so it carries its scale from one
// setting to the next; each row's "shadow" object reports the scale after its last sample
// (tau_scale).
//
// The parts: this file holds main(), the engine's observers and the run loop;
// bench/dllm_bench_spec.h the command line, the task file and the specs;
// bench/dllm_bench_writers.h the JSON rows, the CSVs and the plot.
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "bench/bench_clock.h"
#include "bench/dllm_bench_spec.h"
#include "bench/dllm_bench_writers.h"
#include "bench/entropy_cost.h"
#include "engine/engine.h"
#include "nlohmann/json.hpp"

namespace dllm::bench {
namespace {

// Shadow samples of one setting.
class ShadowCollector final : public EngineObserver {
 public:
  void OnShadowSample(const ShadowSample& sample) override {
    absl::MutexLock lock(&mu_);
    samples_.push_back(sample);
  }
  std::vector<ShadowSample> Take() {
    absl::MutexLock lock(&mu_);
    std::vector<ShadowSample> out;
    out.swap(samples_);
    return out;
  }

 private:
  absl::Mutex mu_;
  std::vector<ShadowSample> samples_;
};

// Splits engine step time into steps with a full refresh and the rest. Called on the engine's
// worker thread.
class StepTimer final : public EngineObserver {
 public:
  struct Totals {
    int64_t full_steps = 0, partial_steps = 0;
    double full_seconds = 0, partial_seconds = 0;
  };
  void OnStep(const StepInfo& info) override {
    absl::MutexLock lock(&mu_);
    if (info.full_sequences > 0) {
      ++totals_.full_steps;
      totals_.full_seconds += info.seconds;
    } else {
      ++totals_.partial_steps;
      totals_.partial_seconds += info.seconds;
    }
  }
  Totals TakeTotals() {
    absl::MutexLock lock(&mu_);
    Totals t = totals_;
    totals_ = Totals{};
    return t;
  }

 private:
  absl::Mutex mu_;
  Totals totals_ ABSL_GUARDED_BY(mu_);
};

class WaitSink final : public EventSink {
 public:
  // Called on the worker thread before OnFinal; read after Wait() (the notification orders
  // them).
  void OnCommit(const CommitEvent& event) override {
    float step_max = 0;
    for (float e : event.entropy_nats) {
      committed_entropies_.push_back(e);
      step_max = std::max(step_max, e);
    }
    if (!event.entropy_nats.empty()) commit_step_max_.push_back(step_max);
  }
  const std::vector<float>& committed_entropies() const { return committed_entropies_; }
  // Max committed entropy of each step that committed something.
  const std::vector<float>& commit_step_max() const { return commit_step_max_; }
  void OnFinal(const FinalEvent& event) override {
    final_ = event;
    done_.Notify();
  }
  const FinalEvent& Wait() {
    done_.WaitForNotification();
    return final_;
  }

 private:
  FinalEvent final_;
  absl::Notification done_;
  std::vector<float> committed_entropies_;
  std::vector<float> commit_step_max_;
};

// How one setting's requests are sent.
struct Submission {
  int gen_length = 0;
  float shadow_rate = -1;  // --shadow; a policy's own shadow= rate wins; < 0: none
  int in_flight = 0;       // the most requests in flight; 0: all at once
};

// Sums over one setting's finished requests, for Result's means and ratios.
struct Tally {
  int64_t steps = 0, full = 0, rows = 0, correct = 0;
  double decision = 0, entropy = 0;
};

// Submits every task. The engine runs up to `batch` of them per step and admits the next one
// as soon as one finishes (continuous batching). When Submit refuses one (the setting is
// invalid for this model) waits for those it accepted and returns its error.
absl::Status SubmitAll(Engine& engine, const std::vector<Task>& tasks, const Setting& setting,
                       const Submission& how, std::vector<std::shared_ptr<WaitSink>>* sinks) {
  for (size_t i = 0; i < tasks.size(); ++i) {
    // A bounded window: wait for the oldest before going over `in_flight` requests.
    if (how.in_flight > 0 && i >= static_cast<size_t>(how.in_flight))
      (*sinks)[i - how.in_flight]->Wait();
    GenerationRequest req;
    req.id = absl::StrCat(i);
    req.messages = {ChatMessage{"user", tasks[i].prompt}};
    req.max_new_tokens = how.gen_length;
    absl::StatusOr<std::vector<int32_t>> canvas =
        CanvasIds(tasks[i], engine.tokenizer(), engine.model_info().mask_token_id, how.gen_length);
    if (!canvas.ok()) Die(std::string(canvas.status().message()));
    req.canvas = *std::move(canvas);
    req.decoding = setting.decoding;
    req.cache = setting.cache;
    req.logprobs = setting.logprobs;
    if (how.shadow_rate >= 0 && !req.cache.shadow_sample_rate)
      req.cache.shadow_sample_rate = how.shadow_rate;
    auto sink = std::make_shared<WaitSink>();
    absl::StatusOr<RequestId> id = engine.Submit(req, sink);
    if (!id.ok()) {
      for (auto& accepted : *sinks) accepted->Wait();
      return id.status();
    }
    sinks->push_back(sink);
  }
  return absl::OkStatus();
}

// Multiply-adds of a finished request: its computed rows against its whole canvas (prompt and
// answer: every key a bidirectional row attends to) and its predicted rows' LM head.
double RequestMacs(const ModelInfo& info, const SequenceStats& stats, int gen_length) {
  const double keys = stats.prompt_tokens + gen_length;
  return static_cast<double>(stats.rows_computed) * (info.row_macs + info.key_macs * keys) +
         static_cast<double>(stats.predicted_rows) * info.lm_head_macs;
}

// Scores task i's finished request into `r` and sums its statistics into `t`. A failed
// request counts as a wrong answer, in its family as in the total.
void Collect(const Task& task, size_t i, const FinalEvent& f, const WaitSink& sink,
             const ModelInfo& info, int gen_length, Result* r, Tally* t) {
  std::pair<int, int>* family = task.family.empty() ? nullptr : &r->by_family[task.family];
  if (family) ++family->second;
  if (!f.status.ok()) {
    ++r->errors;
    std::cerr << "request " << i << ": " << f.status << "\n";
    return;
  }
  r->answers[i] = f.text;
  if (Correct(task, f.text)) {
    r->correct[i] = true;
    ++t->correct;
    if (family) ++family->first;
  }
  r->tokens += f.stats.generated_tokens;
  r->predicted_rows += f.stats.predicted_rows;
  r->rows_computed += f.stats.rows_computed;
  r->macs += RequestMacs(info, f.stats, gen_length);
  r->committed_entropies.insert(r->committed_entropies.end(), sink.committed_entropies().begin(),
                                sink.committed_entropies().end());
  r->step_max_entropies.insert(r->step_max_entropies.end(), sink.commit_step_max().begin(),
                               sink.commit_step_max().end());
  // Steps that committed nothing have a max committed entropy of 0.
  r->step_max_entropies.resize(
      r->step_max_entropies.size() +
          std::max<int64_t>(0, f.stats.steps - int64_t(sink.commit_step_max().size())),
      0.0f);
  t->steps += f.stats.steps;
  t->full += f.stats.full_steps;
  t->rows += f.stats.rows_computed;
  t->decision += f.stats.decision_seconds;
  t->entropy += f.stats.mean_committed_entropy;
}

// Result's means and ratios from the sums, over n tasks and r->wall_s.
void Summarize(const Tally& t, size_t n_tasks, Result* r) {
  const double n = static_cast<double>(n_tasks);
  r->accuracy = n ? t.correct / n : 0;
  r->tokens_per_s = r->wall_s > 0 ? r->tokens / r->wall_s : 0;
  r->full_step_ratio = t.steps ? double(t.full) / t.steps : 0;
  r->rows_per_step = t.steps ? double(t.rows) / t.steps : 0;
  r->decision_s = t.decision;
  r->decision_overhead_frac = r->wall_s > 0 ? t.decision / r->wall_s : 0;
  r->steps = n ? t.steps / n : 0;
  r->total_steps = t.steps;
  r->mean_committed_entropy = n ? t.entropy / n : 0;
  r->steps_per_token = r->tokens ? double(t.steps) / r->tokens : 0;
}

// Runs every task through `setting` and measures it; Result::rejected says when the engine
// refused the setting (nothing else is measured then).
Result RunSetting(Engine& engine, StepTimer& timer, const std::vector<Task>& tasks,
                  const Setting& setting, const Submission& how) {
  Result r;
  r.answers.assign(tasks.size(), std::string());
  r.correct.assign(tasks.size(), false);
  timer.TakeTotals();
  Tally t;
  const auto start = std::chrono::steady_clock::now();
  const double cpu_start = ProcessCpuSeconds();
  std::vector<std::shared_ptr<WaitSink>> sinks;
  if (absl::Status st = SubmitAll(engine, tasks, setting, how, &sinks); !st.ok()) {
    r.rejected = st.ToString();
    return r;
  }
  for (size_t i = 0; i < tasks.size(); ++i) {
    const FinalEvent& f = sinks[i]->Wait();
    Collect(tasks[i], i, f, *sinks[i], engine.model_info(), how.gen_length, &r, &t);
  }
  r.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  r.cpu_s = ProcessCpuSeconds() - cpu_start;
  Summarize(t, tasks.size(), &r);
  const StepTimer::Totals steps = timer.TakeTotals();
  r.full_step_seconds = steps.full_seconds;
  r.partial_step_seconds = steps.partial_seconds;
  r.engine_full_steps = steps.full_steps;
  r.engine_partial_steps = steps.partial_steps;
  return r;
}

// What every setting of the run shares; Main owns all of it.
struct Bench {
  const BenchOptions& o;
  const std::vector<Task>& tasks;
  Engine& engine;
  StepTimer& timer;
  ShadowCollector& collector;
  // Rows carry a "shadow" object, and requests go through a window of --batch.
  bool shadows;
  RowContext row;
};

// The files beside stdout; each is open only when asked for.
struct Outputs {
  std::ofstream answers;  // --answers-out
  std::ofstream shadow_csv;
  std::ofstream sweep_csv;
  std::vector<SweepSeries> sweep_series;
};

// CPU seconds per token of `base` over those of `r` (0 when either produced no token).
double CpuSpeedup(const Result& r, const Result& base) {
  if (r.tokens == 0 || base.tokens == 0 || r.cpu_s <= 0) return 0;
  return (base.cpu_s / static_cast<double>(base.tokens)) /
         (r.cpu_s / static_cast<double>(r.tokens));
}

// The speeds and answers a row is compared with.
struct Reference {
  const Result& base;
  double none_tps;
};

// A measured setting of the decoding loop.
struct Measured {
  const Setting& setting;
  const Result& r;
  const std::vector<ShadowSample>& samples;
  bool in_sweep;  // one of --sweep's settings: a line of the sweep CSV
};

// Untimed: first-touch of weights and allocator pools would otherwise be charged to the
// setting measured next.
void WarmUp(const Bench& b, const Setting& setting) {
  RunSetting(b.engine, b.timer,
             std::vector<Task>(b.tasks.begin(),
                               b.tasks.begin() + std::min<size_t>(b.tasks.size(), b.o.batch)),
             setting, {b.o.gen_length});
}

// A row on stdout and, with --answers-out, with its per-task answers in that file.
void EmitRow(const nlohmann::json& row, const Result& r, Outputs* out) {
  std::cout << row.dump() << std::endl;
  if (!out->answers.is_open()) return;
  nlohmann::json line;
  line["row"] = row;
  line["tokens"] = r.tokens;
  line["answers"] = r.answers;
  line["correct"] = r.correct;
  out->answers << line.dump() << std::endl;
}

// The baseline stored by an earlier run's --answers-out (its first line), for the same tasks
// and answer length: its answers for the paired comparison, its speed for the speed-ups.
Result ReadStoredBaseline(const Bench& b, nlohmann::json* row) {
  std::ifstream in(b.o.baseline_from);
  std::string first;
  if (!in || !std::getline(in, first)) Die("cannot read --baseline-from " + b.o.baseline_from);
  const nlohmann::json line = nlohmann::json::parse(first, nullptr, /*allow_exceptions=*/false);
  if (!line.is_object() || !line.contains("row") || !line["row"].contains("baseline") ||
      !line.contains("answers") || !line.contains("correct") || !line.contains("tokens")) {
    Die(b.o.baseline_from + ": the first line is not a baseline row written by --answers-out");
  }
  *row = line["row"];
  Result base;
  try {
    base.answers = line["answers"].get<std::vector<std::string>>();
    base.correct = line["correct"].get<std::vector<bool>>();
    base.tokens = line["tokens"].get<int64_t>();
    base.tokens_per_s = (*row)["tokens_per_s"].get<double>();
    base.cpu_s = (*row)["cpu_s"].get<double>();
    base.wall_s = (*row)["wall_s"].get<double>();
    base.accuracy = (*row)["accuracy"].get<double>();
  } catch (const nlohmann::json::exception& e) {
    Die(b.o.baseline_from + ": bad baseline line: " + e.what());
  }
  if (base.answers.size() != b.tasks.size() || base.correct.size() != b.tasks.size() ||
      (*row).value("gen_length", 0) != b.o.gen_length ||
      (*row).value("model", std::string()) != b.row.info.family) {
    Die(absl::StrCat(b.o.baseline_from, ": its baseline ran ", base.answers.size(),
                     " tasks of model ", (*row).value("model", std::string("?")), " at gen_length ",
                     (*row).value("gen_length", 0), "; this run has ", b.tasks.size(), " tasks of ",
                     b.row.info.family, " at ", b.o.gen_length));
  }
  (*row)["baseline_from"] = b.o.baseline_from;
  return base;
}

// The baseline, measured first in the run (or read back from --baseline-from), and its row.
Result RunBaseline(const Bench& b, Outputs* out) {
  nlohmann::json j;
  Result base;
  if (!b.o.baseline_from.empty()) {
    base = ReadStoredBaseline(b, &j);
  } else {
    const Setting baseline = ParseBaseline(b.o.baseline_spec, b.row.info, b.o.gen_length);
    WarmUp(b, baseline);
    base = RunSetting(b.engine, b.timer, b.tasks, baseline, {b.o.gen_length});
    if (!base.rejected.empty()) Die("the baseline was rejected: " + base.rejected);
    j = RowJson(b.row, baseline, base);
    j["baseline"] = b.o.baseline_spec;
    j["speedup_vs_baseline"] = 1.0;
    j["speedup_vs_baseline_cpu"] = 1.0;
  }
  EmitRow(j, base, out);
  return base;
}

// A measured setting's row on stdout and its lines in the shadow and sweep CSVs.
void ReportSetting(const Bench& b, const Reference& ref, const Measured& m, Outputs* out) {
  const Result& r = m.r;
  const double speedup = ref.none_tps > 0 ? r.tokens_per_s / ref.none_tps : 0;
  const double vs_baseline = ref.base.tokens_per_s > 0 ? r.tokens_per_s / ref.base.tokens_per_s : 0;
  nlohmann::json j = RowJson(b.row, m.setting, r);
  if (ref.none_tps > 0) j["speedup_vs_none"] = Round(speedup, 3);
  j["speedup_vs_baseline"] = Round(vs_baseline, 3);
  j["speedup_vs_baseline_cpu"] = Round(CpuSpeedup(r, ref.base), 3);
  j["vs_baseline"] = PairedJson(r, ref.base);
  if (b.shadows) {
    j["shadow"] = ShadowJson(
        m.samples,
        m.setting.cache.shadow_sample_rate.value_or(static_cast<float>(std::max(b.o.shadow, 0.0))),
        r.wall_s);
  }
  EmitRow(j, r, out);
  if (out->shadow_csv.is_open()) WriteShadowCsvRows(out->shadow_csv, m.setting, m.samples);
  if (m.in_sweep && out->sweep_csv.is_open()) {
    const nlohmann::json shadow = b.shadows ? j["shadow"] : nlohmann::json();
    WriteSweepCsvRow(out->sweep_csv, {m.setting, r, speedup, vs_baseline, shadow},
                     &out->sweep_series);
  }
}

// One decoding's settings, in order, after a warm-up on the first. Each reports its row; a
// rejected one an error row (fatal for the first: it is the speedup_vs_none baseline).
void RunDecoding(const Bench& b, const std::vector<Setting>& settings, size_t n_policies,
                 const Result& base, Outputs* out) {
  if (settings.empty()) return;
  WarmUp(b, settings[0]);
  double none_tps = 0;
  for (size_t s = 0; s < settings.size(); ++s) {
    const Setting& setting = settings[s];
    b.collector.Take();
    const Result r =
        RunSetting(b.engine, b.timer, b.tasks, setting,
                   {b.o.gen_length, static_cast<float>(b.o.shadow), b.shadows ? b.o.batch : 0});
    const std::vector<ShadowSample> samples = b.collector.Take();
    if (!r.rejected.empty()) {
      std::cout << RejectedRowJson(setting, r.rejected).dump() << std::endl;
      if (s == 0 && b.o.add_none) Die("the none baseline was rejected: " + r.rejected);
      continue;
    }
    if (s == 0 && setting.cache.policy == CachePolicyKind::kNone)
      none_tps = r.tokens_per_s;  // settings[0]: `none`, unless a --policy none came later
    ReportSetting(b, {base, none_tps}, {setting, r, samples, s >= n_policies}, out);
  }
}

void OpenOutputFile(const std::string& path, std::ofstream& csv) {
  csv.open(path);
  if (!csv) Die("cannot write " + path);
}

// Every --decoding (the model's default when none) with every policy and the sweep, then the
// sweep's plot.
void RunSettings(const Bench& b, const Policies& policies, const Result& base, Outputs* out) {
  std::vector<std::string> decodings = b.o.decodings;
  if (decodings.empty()) decodings.push_back("");
  const std::vector<double> sweep_taus = ParseSweepTaus(b.o.sweep);
  if (!sweep_taus.empty()) {
    OpenOutputFile(b.o.sweep_out + ".csv", out->sweep_csv);
    WriteSweepCsvHeader(out->sweep_csv);
  }
  for (const std::string& dspec : decodings) {
    RunDecoding(b, DecodingSettings(dspec, b.row.info, b.o.gen_length, policies, sweep_taus),
                policies.caches.size(), base, out);
  }
  b.engine.Drain(absl::Seconds(5));
  if (!out->sweep_csv.is_open()) return;
  out->sweep_csv.close();
  if (out->sweep_series.empty()) {
    std::cerr << "dllm-bench: every sweep setting was rejected; no plot\n";
    return;
  }
  PlotSweep(b.o.sweep_out, b.o.baseline_spec, out->sweep_series);
}

// The engine for the whole run. A policy's own shadow=RATE (side by side with the same policy
// without it) needs the same observer and bounded window as --shadow; the collector then
// replaces the step timer as the observer.
EngineOptions BenchEngineOptions(const BenchOptions& o, size_t n_tasks,
                                 const TauAutotuneOptions& tune, EngineObserver* observer) {
  EngineOptions options;
  options.model_dir = o.model_dir;
  options.observer = observer;
  options.backend = o.backend == "cuda" ? BackendKind::kCuda : BackendKind::kCpu;
  options.max_batch_sequences = o.batch;
  options.queue_capacity = std::max<int>(64, static_cast<int>(n_tasks));
  options.cpu_threads = o.threads;
  options.max_new_tokens_limit = std::max(1024, o.gen_length);
  options.kv_budget_bytes = int64_t{8} << 30;
  options.shadow.max_time_fraction = o.shadow_budget;
  if (tune.enabled) {
    options.shadow.sample_rate = static_cast<float>(o.shadow);
    options.shadow.tau_autotune = tune;
  }
  return options;
}

// The entropy term's ns per row on this CPU at this vocabulary, charged to EntropyCache's
// decision cost in every row (and printed once, on stderr).
EntropyCost MeasureEntropyCharge(const ModelInfo& info) {
  const EntropyCost cost = MeasureEntropyCost(info.vocab_size);
  std::cerr << "entropy term: " << cost.entropy_ns << " ns per row charged (its "
            << "multiply-adds alone; " << cost.fused_entropy_ns
            << " ns measured inside the fused pass) of " << cost.row_stats_ns
            << " ns of row statistics (vocab " << info.vocab_size << ")\n";
  return cost;
}

int Main(int argc, char** argv) {
  absl::StatusOr<BenchOptions> parsed = ParseBenchOptions({argv + 1, argv + argc});
  if (!parsed.ok()) Die(absl::StrCat(parsed.status().message(), " (see --help)"));
  BenchOptions& o = *parsed;
  if (o.help) {
    std::cout << "usage: dllm-bench --model DIR --tasks FILE.jsonl [--policy SPEC]... "
                 "[--decoding SPEC]... [--limit N] [--batch N] [--threads N] [--gen-length G] "
                 "[--backend cpu|cuda] [--sweep tau=a:b:n|t1,t2,...] [--sweep-out PREFIX] "
                 "[--baseline vanilla|DECODING[@POLICY]] [--shadow RATE [--shadow-budget F] "
                 "[--shadow-out FILE.csv] [--autotune BUDGET[:WINDOW]]] [--answers-out FILE] "
                 "[--baseline-from FILE] [--none=false]\n";
    return 0;
  }
  const TauAutotuneOptions tune = CheckBenchOptions(o);
  const std::vector<Task> tasks = ReadTasks(o.tasks_path, o.limit);
  if (o.backend != "cpu" && o.backend != "cuda") Die("--backend must be cpu or cuda");
  const Policies policies = ParsePolicies(o.policies, o.add_none);
  StepTimer timer;  // outlives the engine
  ShadowCollector collector;
  const bool shadows =
      o.shadow >= 0 || std::any_of(policies.caches.begin(), policies.caches.end(),
                                   [](auto& c) { return c.shadow_sample_rate.has_value(); });
  EngineObserver* observer = &timer;
  if (shadows) observer = &collector;
  const EngineOptions options = BenchEngineOptions(o, tasks.size(), tune, observer);
  Outputs out;
  if (!o.shadow_out.empty()) {
    OpenOutputFile(o.shadow_out, out.shadow_csv);
    WriteShadowCsvHeader(out.shadow_csv);
  }
  absl::StatusOr<std::unique_ptr<Engine>> engine = Engine::Create(options);
  if (!engine.ok()) Die("cannot create the engine: " + engine.status().ToString());
  const ModelInfo& info = (*engine)->model_info();
  if (o.gen_length == 0) o.gen_length = info.default_max_new_tokens;
  if (o.gen_length > options.max_new_tokens_limit) Die("--gen-length exceeds 1024");
  const EntropyCost entropy_cost = MeasureEntropyCharge(info);
  const RowContext row{info, tasks.size(), o.gen_length, o.batch, entropy_cost};
  const Bench b{o, tasks, **engine, timer, collector, shadows, row};
  if (!o.answers_out.empty()) OpenOutputFile(o.answers_out, out.answers);
  const Result base = RunBaseline(b, &out);
  RunSettings(b, policies, base, &out);
  return 0;
}

}  // namespace
}  // namespace dllm::bench

int main(int argc, char** argv) {
  // A bench run that throws (a thread or an allocation that fails under memory pressure)
  // says so and exits 1 rather than aborting (tests/dllm_bench/out_of_memory.cmake).
  try {
    return dllm::bench::Main(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "dllm-bench: " << e.what() << "\n";
  } catch (...) {
    std::cerr << "dllm-bench: unknown exception\n";
  }
  return 1;
}
