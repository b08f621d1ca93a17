// dllm-bench: accuracy and speed of decoding modes and cache policies on a JSONL task file,
// driving the engine directly (no gRPC).
//
//   dllm-bench --model DIR --tasks FILE.jsonl [--policy SPEC]... [--decoding SPEC]...
//              [--limit N] [--batch N] [--threads N] [--gen-length G] [--backend cpu|cuda]
//              [--sweep tau=a:b:n|tau=t1,t2,... [--sweep-out PREFIX]] [--baseline SETTING]
//              [--shadow RATE [--shadow-budget F] [--shadow-out FILE.csv]
//               [--autotune BUDGET[:WINDOW]]]
//
// Policy specs: none | entropy[:tau=0.5,k=32] | dual | prefix | interval[:n=8,k=32] |
// d2cache[:current_k=32,rollout_p=0.1,sigma=10] | elastic[:gamma=0.9]; any may
// add shadow=RATE, that setting's own shadow sample rate (e.g. the same policy with and
// without shadows, side by side in one run: what shadow sampling costs).
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
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <iostream>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/flags/flag.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "bench/entropy_cost.h"
#include "cli/flags.h"
#include "engine/core/param_fields.h"
#include "engine/engine.h"
#include "nlohmann/json.hpp"

// The flags, read once into a BenchOptions (ParseBenchOptions). --policy and --decoding may be
// repeated and their specs contain commas: they are collected by cli::ParseFlags, not flags.
ABSL_FLAG(std::string, model, "", "model directory (required)");
ABSL_FLAG(std::string, tasks, "", "JSONL task file (required)");
ABSL_FLAG(int, limit, 0, "use the first N tasks (0: all)");
ABSL_FLAG(int, batch, 1, "requests the engine steps together");
ABSL_FLAG(int, threads, 0, "CPU threads (0: the engine's default)");
ABSL_FLAG(int, gen_length, 0, "answer length (0: the model's default)");
ABSL_FLAG(std::string, backend, "cpu", "cpu | cuda");
ABSL_FLAG(std::string, sweep, "", "tau=a:b:n or tau=t1,t2,...: an EntropyCache tau sweep");
ABSL_FLAG(std::string, sweep_out, "dllm_bench_sweep", "the sweep's PREFIX.csv and PREFIX.png");
ABSL_FLAG(std::string, baseline, "vanilla", "vanilla or DECODING_SPEC[@POLICY_SPEC]");
ABSL_FLAG(double, shadow, -1, "shadow sample rate in [0, 1] (< 0: no shadows)");
ABSL_FLAG(double, shadow_budget, std::numeric_limits<double>::infinity(),
          "cap on the shadows' time fraction");
ABSL_FLAG(std::string, shadow_out, "", "CSV of every shadow sample");
ABSL_FLAG(std::string, autotune, "", "BUDGET[:WINDOW]: the engine's tau autotuner");

namespace dllm {
namespace {

// dllm-bench's command line (see the top of this file).
struct BenchOptions {
  bool help = false;
  std::string model_dir, tasks_path, sweep, sweep_out, backend, baseline_spec;
  std::vector<std::string> policies, decodings;
  int limit = 0, batch = 0, threads = 0, gen_length = 0;  // gen_length 0: the model's default
  double shadow = 0;                                      // < 0: no --shadow
  double shadow_budget = 0;
  std::string shadow_out;
  std::string autotune;  // BUDGET[:WINDOW]; empty: off
};

// Sets the flags from `args` (argv without the program name) and reads them once.
// INVALID_ARGUMENT naming the flag for unknown flags, missing or bad values.
absl::StatusOr<BenchOptions> ParseBenchOptions(const std::vector<std::string>& args) {
  BenchOptions o;
  absl::Status st =
      cli::ParseFlags(args, {"policy", "decoding"}, [&o](const cli::ParsedArgs& parsed) {
        o.help = parsed.help;
        if (!parsed.positional.empty()) {
          return absl::InvalidArgumentError(
              absl::StrCat("unexpected argument '", parsed.positional[0], "'"));
        }
        o.model_dir = absl::GetFlag(FLAGS_model);
        o.tasks_path = absl::GetFlag(FLAGS_tasks);
        o.sweep = absl::GetFlag(FLAGS_sweep);
        o.sweep_out = absl::GetFlag(FLAGS_sweep_out);
        o.backend = absl::GetFlag(FLAGS_backend);
        o.baseline_spec = absl::GetFlag(FLAGS_baseline);
        if (auto it = parsed.repeated.find("policy"); it != parsed.repeated.end()) {
          o.policies = it->second;
        }
        if (auto it = parsed.repeated.find("decoding"); it != parsed.repeated.end()) {
          o.decodings = it->second;
        }
        o.limit = absl::GetFlag(FLAGS_limit);
        o.batch = absl::GetFlag(FLAGS_batch);
        o.threads = absl::GetFlag(FLAGS_threads);
        o.gen_length = absl::GetFlag(FLAGS_gen_length);
        o.shadow = absl::GetFlag(FLAGS_shadow);
        o.shadow_budget = absl::GetFlag(FLAGS_shadow_budget);
        o.shadow_out = absl::GetFlag(FLAGS_shadow_out);
        o.autotune = absl::GetFlag(FLAGS_autotune);
        return absl::OkStatus();
      });
  if (!st.ok()) return st;
  return o;
}

struct Task {
  std::string prompt;
  std::string answer;
  std::string final;   // non-empty: score the "#### " line against it (long-form tasks)
  std::string family;  // non-empty: also counted in the row's accuracy_by_family
};

struct Setting {
  std::string decoding_spec;
  std::string policy_spec;
  DecodingParams decoding;
  CacheParams cache;
};

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

struct Result {
  double accuracy = 0;
  std::map<std::string, std::pair<int, int>> by_family;  // family -> (correct, tasks)
  double tokens_per_s = 0;
  double wall_s = 0;
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
  // Decoding dynamics: every committed token's entropy, and every step's max committed
  // entropy (0 for a step that committed nothing), over all requests.
  std::vector<float> committed_entropies;
  std::vector<float> step_max_entropies;
  // Per task, in task order, for the paired comparison with the baseline: the answer text
  // (empty for a failed request) and whether it was scored correct.
  std::vector<std::string> answers;
  std::vector<bool> correct;
};

[[noreturn]] void Die(const std::string& message) {
  std::cerr << "dllm-bench: " << message << "\n";
  std::exit(2);
}

std::map<std::string, std::string> ParseOptions(absl::string_view spec, std::string* head) {
  std::map<std::string, std::string> out;
  std::pair<absl::string_view, absl::string_view> parts =
      absl::StrSplit(spec, absl::MaxSplits(':', 1));
  *head = std::string(parts.first);
  if (parts.second.empty()) return out;
  for (absl::string_view kv : absl::StrSplit(parts.second, ',')) {
    std::pair<std::string, std::string> p = absl::StrSplit(kv, absl::MaxSplits('=', 1));
    if (p.first.empty() || p.second.empty()) Die(absl::StrCat("bad option '", kv, "' in ", spec));
    out[p.first] = p.second;
  }
  return out;
}

double ToDouble(const std::string& key, const std::string& value) {
  if (value == "inf" || value == "+inf") return std::numeric_limits<double>::infinity();
  if (value == "-inf") return -std::numeric_limits<double>::infinity();
  double d;
  if (!absl::SimpleAtod(value, &d)) Die(absl::StrCat("option ", key, ": not a number: ", value));
  return d;
}

int ToInt(const std::string& key, const std::string& value) {
  int i;
  if (!absl::SimpleAtoi(value, &i)) Die(absl::StrCat("option ", key, ": not an integer: ", value));
  return i;
}

// A spec's key=value options are request fields of `section`, by name or alias
// (engine/core/param_fields.h: "tau" is cache.entropy_threshold, "w" decoding.window).
void ApplySpecOptions(ParamSection section, const std::map<std::string, std::string>& opts,
                      const std::string& spec, DecodingParams* d, CacheParams* c) {
  for (const auto& [k, v] : opts) {
    const ParamField* f = FindParamField(section, k);
    if (f == nullptr)
      Die(absl::StrCat("unknown ", SectionName(section), " option ", k, " in ", spec));
    absl::StatusOr<ParamValue> value = ParseParamText(*f, v);
    if (!value.ok()) Die(absl::StrCat(value.status().message(), " in ", spec));
    f->set(*value, d, c);
  }
  if (absl::Status st = ValidateParamFields(*d, *c, ParamLimits{}); !st.ok()) {
    Die(absl::StrCat(st.message(), " in ", spec));
  }
}

DecodingParams ParseDecoding(const std::string& spec, const DecodingParams& defaults, int gen) {
  std::string head;
  auto opts = ParseOptions(spec, &head);
  DecodingParams d = defaults;
  if (head == "block") {
    d.schedule = Schedule::kBlock;
    if (defaults.schedule != Schedule::kBlock) d.remasking = Remasking::kLowConfidence;
    d.block_length = std::min(32, gen);
  } else if (head == "window") {
    d.schedule = Schedule::kWindow;
    if (d.remasking == Remasking::kOrigin) d.remasking = Remasking::kLowConfidence;
    d.window = 16;
    d.confidence_threshold = 0.9f;
  } else if (head == "timestep") {
    d.schedule = Schedule::kTimestep;
    if (defaults.schedule != Schedule::kTimestep) d.remasking = Remasking::kEntropy;
    d.confidence_threshold = 0;
  } else {
    Die("unknown decoding '" + head + "' (block|window|timestep)");
  }
  CacheParams unused;
  ApplySpecOptions(ParamSection::kDecoding, opts, spec, &d, &unused);
  return d;
}

CacheParams ParsePolicy(const std::string& spec) {
  std::string head;
  auto opts = ParseOptions(spec, &head);
  CacheParams c;
  std::optional<CachePolicyKind> policy = ParseCachePolicy(head);
  if (!policy) Die("unknown policy '" + head + "' (" + CachePolicyNames() + ")");
  c.policy = *policy;
  DecodingParams unused;
  ApplySpecOptions(ParamSection::kCache, opts, spec, &unused, &c);
  return c;
}

std::string Trim(absl::string_view s) { return std::string(absl::StripAsciiWhitespace(s)); }

// The text after the last line that starts with "#### ", trimmed; nullopt when there is none
// (tools/tasks/longform.py extract_final).
std::optional<std::string> FinalLine(absl::string_view text) {
  std::optional<std::string> out;
  for (absl::string_view line : absl::StrSplit(text, '\n'))
    if (absl::ConsumePrefix(&line, "#### ")) out = Trim(line);
  return out;
}

bool Correct(const Task& task, const std::string& text) {
  if (task.final.empty()) return Trim(text) == Trim(task.answer);
  return FinalLine(text) == task.final;
}

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

Result RunSetting(Engine& engine, StepTimer& timer, const std::vector<Task>& tasks,
                  const Setting& setting, int gen_length, float shadow_rate = -1,
                  int in_flight = 0) {
  Result r;
  r.answers.assign(tasks.size(), std::string());
  r.correct.assign(tasks.size(), false);
  timer.TakeTotals();
  int64_t steps = 0, full = 0, rows = 0, correct = 0;
  double decision = 0, entropy = 0;
  const auto start = std::chrono::steady_clock::now();
  // All requests are submitted at once; the engine runs up to `batch` of them per step and
  // admits the next one as soon as one finishes (continuous batching).
  {
    const size_t begin = 0, end = tasks.size();
    std::vector<std::shared_ptr<WaitSink>> sinks;
    for (size_t i = begin; i < end; ++i) {
      // A bounded window: wait for the oldest before going over `in_flight` requests.
      if (in_flight > 0 && i >= begin + in_flight) sinks[i - begin - in_flight]->Wait();
      GenerationRequest req;
      req.id = absl::StrCat(i);
      req.messages = {ChatMessage{"user", tasks[i].prompt}};
      req.max_new_tokens = gen_length;
      req.decoding = setting.decoding;
      req.cache = setting.cache;
      // A policy's own shadow= rate wins over --shadow.
      if (shadow_rate >= 0 && !req.cache.shadow_sample_rate)
        req.cache.shadow_sample_rate = shadow_rate;
      auto sink = std::make_shared<WaitSink>();
      absl::StatusOr<RequestId> id = engine.Submit(req, sink);
      if (!id.ok()) {
        // Wait for what was accepted, then report the setting as rejected.
        for (auto& accepted : sinks) accepted->Wait();
        r.rejected = id.status().ToString();
        return r;
      }
      sinks.push_back(sink);
    }
    for (size_t i = begin; i < end; ++i) {
      const FinalEvent& f = sinks[i - begin]->Wait();
      // A failed request counts as a wrong answer, in its family as in the total.
      std::pair<int, int>* family =
          tasks[i].family.empty() ? nullptr : &r.by_family[tasks[i].family];
      if (family) ++family->second;
      if (!f.status.ok()) {
        ++r.errors;
        std::cerr << "request " << i << ": " << f.status << "\n";
        continue;
      }
      r.answers[i] = f.text;
      if (Correct(tasks[i], f.text)) {
        r.correct[i] = true;
        ++correct;
        if (family) ++family->first;
      }
      r.tokens += f.stats.generated_tokens;
      r.predicted_rows += f.stats.predicted_rows;
      const WaitSink& sink = *sinks[i - begin];
      r.committed_entropies.insert(r.committed_entropies.end(), sink.committed_entropies().begin(),
                                   sink.committed_entropies().end());
      r.step_max_entropies.insert(r.step_max_entropies.end(), sink.commit_step_max().begin(),
                                  sink.commit_step_max().end());
      r.step_max_entropies.resize(
          r.step_max_entropies.size() +
              std::max<int64_t>(0, f.stats.steps - int64_t(sink.commit_step_max().size())),
          0.0f);
      steps += f.stats.steps;
      full += f.stats.full_steps;
      rows += f.stats.rows_computed;
      decision += f.stats.decision_seconds;
      entropy += f.stats.mean_committed_entropy;
    }
  }
  r.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double n = static_cast<double>(tasks.size());
  r.accuracy = n ? correct / n : 0;
  r.tokens_per_s = r.wall_s > 0 ? r.tokens / r.wall_s : 0;
  r.full_step_ratio = steps ? double(full) / steps : 0;
  r.rows_per_step = steps ? double(rows) / steps : 0;
  r.decision_s = decision;
  r.decision_overhead_frac = r.wall_s > 0 ? decision / r.wall_s : 0;
  r.steps = n ? steps / n : 0;
  r.total_steps = steps;
  r.mean_committed_entropy = n ? entropy / n : 0;
  r.steps_per_token = r.tokens ? double(steps) / r.tokens : 0;
  const StepTimer::Totals t = timer.TakeTotals();
  r.full_step_seconds = t.full_seconds;
  r.partial_step_seconds = t.partial_seconds;
  r.engine_full_steps = t.full_steps;
  r.engine_partial_steps = t.partial_steps;
  return r;
}

double Round(double x, int digits) {
  const double f = std::pow(10.0, digits);
  return std::round(x * f) / f;
}

nlohmann::json DecodingJson(const DecodingParams& d) {
  nlohmann::json j;
  j["schedule"] = Name(d.schedule);
  j["remasking"] = Name(d.remasking);
  j["steps"] = d.steps;
  if (d.schedule == Schedule::kBlock) j["block_length"] = d.block_length;
  if (d.schedule == Schedule::kWindow) j["window"] = d.window;
  if (d.schedule == Schedule::kTimestep) j["eps"] = Round(d.eps, 6);
  if (d.confidence_threshold > 0) j["threshold"] = Round(d.confidence_threshold, 4);
  if (d.temperature > 0) j["temperature"] = Round(d.temperature, 4);
  return j;
}

// The policy's own knobs (the cache fields of engine/core/param_fields.h that name it), and a
// shadow rate when the setting has one, keyed by their short spec names ("tau", "rollout_p").
nlohmann::json PolicyParams(const CacheParams& c) {
  nlohmann::json j = nlohmann::json::object();
  const DecodingParams unused;
  for (const ParamField& f : ParamFields()) {
    if (f.section != ParamSection::kCache) continue;
    const bool own = std::find(f.policies.begin(), f.policies.end(), c.policy) != f.policies.end();
    const std::optional<ParamValue> value = f.get(unused, c);
    if (!value || !(own || (f.optional && f.policies.empty()))) continue;
    const std::string key(f.alias.empty() ? f.name : f.alias);
    if (f.type != ParamType::kFloat) {
      j[key] = std::get<int64_t>(*value);
    } else if (const double x = std::get<double>(*value); std::isfinite(x)) {
      j[key] = Round(x, 6);
    } else {
      j[key] = x > 0 ? "inf" : "-inf";
    }
  }
  return j;
}

// Summary of a setting's shadow samples (the same figures as the dllm_cache_shadow_* metrics).
// time_fraction: shadow time / the rest of the setting's wall time (wall_s), its throughput cost.
nlohmann::json ShadowJson(const std::vector<ShadowSample>& samples, double rate, double wall_s) {
  nlohmann::json j;
  j["rate"] = Round(rate, 6);
  j["samples"] = samples.size();
  double kl = 0, kl_max = 0, change = 0, seconds = 0;
  int mismatches = 0, token_mismatches = 0, with_commits = 0;
  double drift[kShadowRegions] = {};
  int drift_n[kShadowRegions] = {};
  for (const auto& s : samples) {
    kl += s.kl_mean;
    kl_max = std::max(kl_max, s.kl_max);
    mismatches += s.decision_mismatch ? 1 : 0;
    token_mismatches += s.token_mismatch ? 1 : 0;
    if (s.committed > 0) {
      change += s.max_prob_change;
      ++with_commits;
    }
    seconds += s.seconds;
    for (int r = 0; r < kShadowRegions; ++r) {
      if (s.drift[r].positions == 0) continue;
      drift[r] += s.drift[r].kv;
      ++drift_n[r];
    }
  }
  const double n = static_cast<double>(samples.size());
  j["mean_kl"] = n ? Round(kl / n, 6) : 0.0;
  j["max_kl"] = Round(kl_max, 6);
  j["mismatch_rate"] = n ? Round(mismatches / n, 4) : 0.0;
  j["token_mismatch_rate"] = n ? Round(token_mismatches / n, 4) : 0.0;
  j["mean_max_prob_change"] = with_commits ? Round(change / with_commits, 5) : 0.0;
  nlohmann::json d = nlohmann::json::object();
  for (int r = 0; r < kShadowRegions; ++r) {
    if (drift_n[r]) d[ShadowRegionName(r)] = Round(drift[r] / drift_n[r], 5);
  }
  j["mean_kv_drift"] = d;
  j["shadow_s"] = Round(seconds, 3);
  j["time_fraction"] = wall_s > seconds ? Round(seconds / (wall_s - seconds), 4) : 0.0;
  j["tau_scale"] = samples.empty() ? 1.0 : Round(samples.back().tau_scale, 5);
  return j;
}

std::string PolicyName(CachePolicyKind k) { return std::string(Name(k)); }

// The paper's vanilla baseline: block decoding, one token per step, no cache.
Setting VanillaSetting(const ModelInfo& info, int gen_length) {
  Setting s;
  s.decoding_spec = "vanilla";
  s.policy_spec = "none";
  s.decoding = info.default_decoding;
  s.decoding.schedule = Schedule::kBlock;
  s.decoding.block_length = std::min(32, gen_length);
  s.decoding.steps = gen_length;
  s.decoding.confidence_threshold = 0;
  s.decoding.temperature = 0;
  s.decoding.remasking =
      info.family == "dream" ? Remasking::kMaskgitPlus : Remasking::kLowConfidence;
  s.cache = CacheParams{};
  return s;
}

Setting ParseBaseline(const std::string& spec, const ModelInfo& info, int gen_length) {
  if (spec == "vanilla") return VanillaSetting(info, gen_length);
  std::pair<std::string, std::string> parts = absl::StrSplit(spec, absl::MaxSplits('@', 1));
  Setting s;
  s.decoding_spec = parts.first;
  s.policy_spec = parts.second.empty() ? "none" : parts.second;
  s.decoding = ParseDecoding(parts.first, info.default_decoding, gen_length);
  s.cache = ParsePolicy(s.policy_spec);
  return s;
}

// Quantile q of `values` (nearest rank on a sorted copy); 0 for none.
double Quantile(std::vector<float> values, double q) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t i =
      std::min(values.size() - 1, static_cast<size_t>(std::lround(q * (values.size() - 1))));
  return values[i];
}

// Decoding dynamics, comparable with published figures for real dLLMs: tokens per forward
// (tokens committed per denoising step, end tokens included: what one forward decides), the
// histogram of committed tokens' entropies, and the distribution of each step's max committed
// entropy (EntropyCache's signal; 0 for a step that commits nothing).
nlohmann::json DynamicsJson(const Result& r, int64_t steps) {
  static constexpr double kEdges[] = {0.01, 0.1, 0.5, 1.0, 2.0};  // nats; bins [lo, hi)
  nlohmann::json j;
  const double committed = static_cast<double>(r.committed_entropies.size());
  j["tokens_per_forward"] = Round(steps ? committed / steps : 0, 3);
  double sum = 0;
  std::vector<int64_t> counts(std::size(kEdges) + 1, 0);
  for (float e : r.committed_entropies) {
    sum += e;
    counts[std::upper_bound(std::begin(kEdges), std::end(kEdges), double(e)) -
           std::begin(kEdges)]++;
  }
  j["mean_token_entropy"] = Round(committed ? sum / committed : 0, 4);
  nlohmann::json hist = nlohmann::json::object();
  for (size_t b = 0; b < counts.size(); ++b) {
    const std::string lo = b == 0 ? "0" : absl::StrCat(kEdges[b - 1]);
    const std::string hi = b < std::size(kEdges) ? absl::StrCat(kEdges[b]) : "inf";
    hist[absl::StrCat(lo, "-", hi)] = Round(committed ? counts[b] / committed : 0, 4);
  }
  j["committed_entropy_hist"] = hist;
  const std::vector<float>& m = r.step_max_entropies;
  double above = 0, msum = 0;
  for (float e : m) {
    above += e > 0.5f ? 1 : 0;
    msum += e;
  }
  j["step_max_entropy"] = {{"mean", Round(m.empty() ? 0 : msum / m.size(), 4)},
                           {"p50", Round(Quantile(m, 0.5), 4)},
                           {"p90", Round(Quantile(m, 0.9), 4)},
                           {"frac_above_0.5", Round(m.empty() ? 0 : above / m.size(), 4)}};
  return j;
}

// Paired answer changes of `r` against the baseline on the same tasks: how many answers
// differ in text, how many went from wrong to right (gained) and right to wrong (lost), and
// the standard error of the accuracy difference over the per-task differences (the paired
// test the issue asks for: an accuracy delta alone hides answers that change both ways).
nlohmann::json PairedJson(const Result& r, const Result& base) {
  int changed = 0, gained = 0, lost = 0;
  const size_t n = std::min(r.answers.size(), base.answers.size());
  for (size_t i = 0; i < n; ++i) {
    changed += r.answers[i] != base.answers[i];
    gained += r.correct[i] && !base.correct[i];
    lost += !r.correct[i] && base.correct[i];
  }
  nlohmann::json j;
  j["tasks"] = n;
  j["changed"] = changed;
  j["gained"] = gained;
  j["lost"] = lost;
  const double mean = n ? double(gained - lost) / n : 0;
  const double var = n ? double(gained + lost) / n - mean * mean : 0;
  j["accuracy_diff"] = Round(mean, 4);
  j["accuracy_diff_se"] = Round(n > 1 ? std::sqrt(std::max(0.0, var) / (n - 1)) : 0, 4);
  return j;
}

nlohmann::json RowJson(const ModelInfo& info, const Setting& setting, const Result& r,
                       size_t n_tasks, int gen_length, int batch,
                       const bench::EntropyCost& entropy_cost) {
  nlohmann::json j;
  j["model"] = info.family;
  j["decoding"] = DecodingJson(setting.decoding);
  j["policy"] = PolicyName(setting.cache.policy);
  j["params"] = PolicyParams(setting.cache);
  j["tasks"] = n_tasks;
  j["gen_length"] = gen_length;
  j["batch"] = batch;
  j["accuracy"] = Round(r.accuracy, 4);
  for (const auto& [family, counts] : r.by_family)
    j["accuracy_by_family"][family] = Round(double(counts.first) / counts.second, 4);
  j["tokens_per_s"] = Round(r.tokens_per_s, 2);
  j["steps_per_token"] = Round(r.steps_per_token, 4);
  j["full_step_ratio"] = Round(r.full_step_ratio, 4);
  j["rows_per_step"] = Round(r.rows_per_step, 2);
  const double step_s = r.full_step_seconds + r.partial_step_seconds;
  j["full_step_s"] = Round(r.full_step_seconds, 4);
  j["partial_step_s"] = Round(r.partial_step_seconds, 4);
  j["full_time_frac"] = Round(step_s > 0 ? r.full_step_seconds / step_s : 0, 4);
  j["ms_per_full_step"] =
      Round(r.engine_full_steps ? 1e3 * r.full_step_seconds / r.engine_full_steps : 0, 3);
  j["ms_per_partial_step"] =
      Round(r.engine_partial_steps ? 1e3 * r.partial_step_seconds / r.engine_partial_steps : 0, 3);
  // EntropyCache's decision is its Plan + Observe bookkeeping plus the entropy term of the row
  // statistics, which the engine computes inside the LM head for every predicted row: charged
  // here at this CPU's measured ns per row (bench/entropy_cost.h). Other policies' decisions
  // do not read the entropy.
  const double entropy_s = setting.cache.policy == CachePolicyKind::kEntropy
                               ? r.predicted_rows * entropy_cost.entropy_ns * 1e-9
                               : 0.0;
  j["decision_overhead_frac"] = Round(r.wall_s > 0 ? (r.decision_s + entropy_s) / r.wall_s : 0, 5);
  j["decision_cost"] = {{"policy_s", Round(r.decision_s, 5)},
                        {"entropy_term_s", Round(entropy_s, 5)},
                        {"predicted_rows", r.predicted_rows}};
  // The rate behind entropy_term_s, on the rows it is charged to: a reader (and the smoke test)
  // can check the charge without the machine that measured it.
  if (setting.cache.policy == CachePolicyKind::kEntropy)
    j["decision_cost"]["entropy_ns_per_row"] = Round(entropy_cost.entropy_ns, 1);
  j["steps"] = Round(r.steps, 2);
  j["mean_committed_entropy"] = Round(r.mean_committed_entropy, 4);
  j["dynamics"] = DynamicsJson(r, r.total_steps);
  j["wall_s"] = Round(r.wall_s, 3);
  if (r.errors) j["errors"] = r.errors;
  return j;
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
                 "[--shadow-out FILE.csv] [--autotune BUDGET[:WINDOW]]]\n";
    return 0;
  }
  if (o.model_dir.empty() || o.tasks_path.empty()) Die("--model and --tasks are required");
  if (o.batch < 1) Die("--batch must be >= 1");
  if (o.gen_length < 0) Die("--gen-length must be >= 1");
  if (o.shadow > 1) Die("--shadow must be in [0, 1]");
  if (!o.shadow_out.empty() && o.shadow < 0) Die("--shadow-out needs --shadow");
  if (!(o.shadow_budget > 0)) Die("--shadow-budget must be > 0");
  TauAutotuneOptions tune;
  if (!o.autotune.empty()) {
    if (!(o.shadow > 0)) Die("--autotune needs --shadow RATE > 0 (it learns from shadow samples)");
    std::vector<std::string> parts = absl::StrSplit(o.autotune, ':');
    if (parts.size() > 2) Die("--autotune expects BUDGET[:WINDOW]");
    tune.enabled = true;
    tune.mismatch_budget = ToDouble("--autotune", parts[0]);
    tune.window_samples = parts.size() == 2 ? ToInt("--autotune", parts[1]) : 20;
    if (absl::Status st = ValidateTauAutotuneOptions(tune, static_cast<float>(o.shadow));
        !st.ok()) {
      Die("--autotune: " + std::string(st.message()));
    }
  }

  std::vector<Task> tasks;
  {
    std::ifstream in(o.tasks_path);
    if (!in) Die("cannot open " + o.tasks_path);
    std::string line;
    int line_no = 0;
    while (std::getline(in, line)) {
      ++line_no;
      if (Trim(line).empty()) continue;
      nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
      if (j.is_discarded() || !j.contains("prompt") || !j.contains("answer") ||
          !j["prompt"].is_string() || !j["answer"].is_string()) {
        Die(absl::StrCat(o.tasks_path, ":", line_no,
                         ": expected {\"prompt\": str, \"answer\": str}"));
      }
      Task task{j["prompt"], j["answer"], "", ""};
      for (auto [key, field] : {std::pair{"final", &task.final}, {"family", &task.family}}) {
        if (!j.contains(key)) continue;
        if (!j[key].is_string()) Die(absl::StrCat(o.tasks_path, ":", line_no, ": bad ", key));
        *field = j[key];
      }
      tasks.push_back(std::move(task));
      if (o.limit > 0 && static_cast<int>(tasks.size()) >= o.limit) break;
    }
  }
  if (tasks.empty()) Die("no tasks in " + o.tasks_path);

  StepTimer timer;  // outlives the engine
  EngineOptions options;
  options.model_dir = o.model_dir;
  options.observer = &timer;
  options.backend = o.backend == "cuda" ? BackendKind::kCuda : BackendKind::kCpu;
  if (o.backend != "cpu" && o.backend != "cuda") Die("--backend must be cpu or cuda");
  options.max_batch_sequences = o.batch;
  options.queue_capacity = std::max<int>(64, static_cast<int>(tasks.size()));
  options.cpu_threads = o.threads;
  options.max_new_tokens_limit = std::max(1024, o.gen_length);
  options.kv_budget_bytes = int64_t{8} << 30;
  std::vector<CacheParams> caches;
  std::vector<std::string> cache_specs;
  bool has_none = false;
  for (const std::string& p : o.policies) {
    caches.push_back(ParsePolicy(p));
    cache_specs.push_back(p);
    has_none |= caches.back().policy == CachePolicyKind::kNone;
  }
  if (!has_none) {
    caches.insert(caches.begin(), CacheParams{});
    cache_specs.insert(cache_specs.begin(), "none");
  }
  ShadowCollector collector;
  // A policy's own shadow=RATE (side by side with the same policy without it) needs the
  // same observer and bounded window as --shadow.
  const bool shadows = o.shadow >= 0 || std::any_of(caches.begin(), caches.end(), [](auto& c) {
                         return c.shadow_sample_rate.has_value();
                       });
  if (shadows) options.observer = &collector;
  options.shadow.max_time_fraction = o.shadow_budget;
  if (tune.enabled) {
    options.shadow.sample_rate = static_cast<float>(o.shadow);
    options.shadow.tau_autotune = tune;
  }
  std::ofstream shadow_csv;
  if (!o.shadow_out.empty()) {
    shadow_csv.open(o.shadow_out);
    if (!shadow_csv) Die("cannot write " + o.shadow_out);
    shadow_csv << "decoding,policy,tau,k,request,step,entropy,kl_mean,kl_max,mismatch,"
                  "max_prob_change,committed,token_mismatch";
    for (int r = 0; r < kShadowRegions; ++r) {
      shadow_csv << ",drift_" << ShadowRegionName(r);
      for (int g = 0; g < kShadowLayerGroups; ++g)
        shadow_csv << ",drift_" << ShadowRegionName(r) << "_" << ShadowLayerGroupName(g);
    }
    shadow_csv << "\n";
  }
  absl::StatusOr<std::unique_ptr<Engine>> engine = Engine::Create(options);
  if (!engine.ok()) Die("cannot create the engine: " + engine.status().ToString());
  const ModelInfo& info = (*engine)->model_info();
  if (o.gen_length == 0) o.gen_length = info.default_max_new_tokens;
  if (o.gen_length > options.max_new_tokens_limit) Die("--gen-length exceeds 1024");
  // The entropy term's ns per row on this CPU at this vocabulary, charged to EntropyCache's
  // decision cost in every row (and printed once, on stderr).
  const bench::EntropyCost entropy_cost = bench::MeasureEntropyCost(info.vocab_size);
  std::cerr << "entropy term: " << entropy_cost.entropy_ns << " ns per row charged (its "
            << "multiply-adds alone; " << entropy_cost.fused_entropy_ns
            << " ns measured inside the fused pass) of " << entropy_cost.row_stats_ns
            << " ns of row statistics (vocab " << info.vocab_size << ")\n";

  // The baseline, measured first (after an untimed warm-up: first-touch of weights and
  // allocator pools would otherwise be charged to it).
  const Setting baseline = ParseBaseline(o.baseline_spec, info, o.gen_length);
  RunSetting(
      **engine, timer,
      std::vector<Task>(tasks.begin(), tasks.begin() + std::min<size_t>(tasks.size(), o.batch)),
      baseline, o.gen_length);
  const Result base = RunSetting(**engine, timer, tasks, baseline, o.gen_length);
  if (!base.rejected.empty()) Die("the baseline was rejected: " + base.rejected);
  {
    nlohmann::json j =
        RowJson(info, baseline, base, tasks.size(), o.gen_length, o.batch, entropy_cost);
    j["baseline"] = o.baseline_spec;
    j["speedup_vs_baseline"] = 1.0;
    std::cout << j.dump() << std::endl;
  }

  if (o.decodings.empty()) o.decodings.push_back("");
  int sweep_k = 32;
  for (const CacheParams& c : caches)
    if (c.policy == CachePolicyKind::kEntropy) {
      sweep_k = c.recent_k;
      break;
    }
  std::vector<double> sweep_taus;
  if (!o.sweep.empty()) {
    absl::string_view rest(o.sweep);
    if (!absl::ConsumePrefix(&rest, "tau=")) Die("--sweep expects tau=a:b:n or tau=t1,t2,...");
    if (absl::StrContains(rest, ',')) {
      // An explicit list: entropies of small models span decades (1e-7 .. 1 nats), which a
      // linear grid cannot cover.
      for (absl::string_view t : absl::StrSplit(rest, ','))
        sweep_taus.push_back(ToDouble("sweep", std::string(t)));
    } else {
      std::vector<std::string> parts = absl::StrSplit(rest, ':');
      if (parts.size() != 3) Die("--sweep expects tau=a:b:n or tau=t1,t2,...");
      const double a = ToDouble("sweep", parts[0]), b = ToDouble("sweep", parts[1]);
      const int n = ToInt("sweep", parts[2]);
      if (n < 1) Die("--sweep n must be >= 1");
      for (int i = 0; i < n; ++i) sweep_taus.push_back(n == 1 ? a : a + (b - a) * i / (n - 1));
    }
  }

  std::ofstream csv;
  if (!sweep_taus.empty()) {
    csv.open(o.sweep_out + ".csv");
    if (!csv) Die("cannot write " + o.sweep_out + ".csv");
    csv << "decoding,tau,k,accuracy,tokens_per_s,speedup_vs_none,full_step_ratio,rows_per_step,"
           "speedup_vs_baseline,shadow_samples,mismatch_rate,mean_kl";
    for (int r = 0; r < kShadowRegions; ++r) csv << ",drift_" << ShadowRegionName(r);
    csv << ",token_mismatch_rate\n";
  }
  // The sweep CSV's data rows of each decoding (0-based, contiguous): one plotted series each.
  struct SweepSeries {
    std::string decoding;
    int first_row = 0, rows = 0;
  };
  std::vector<SweepSeries> sweep_series;
  for (const std::string& dspec : o.decodings) {
    const DecodingParams decoding =
        dspec.empty() ? [&] {
          DecodingParams d = info.default_decoding;
          if (d.schedule == Schedule::kBlock) d.block_length = std::min(d.block_length, o.gen_length);
          return d;
        }()
                      : ParseDecoding(dspec, info.default_decoding, o.gen_length);
    const std::string dname = dspec.empty() ? "default" : dspec;
    std::vector<Setting> settings;
    for (size_t i = 0; i < caches.size(); ++i)
      settings.push_back({dname, cache_specs[i], decoding, caches[i]});
    for (double tau : sweep_taus) {
      CacheParams c;
      c.policy = CachePolicyKind::kEntropy;
      c.entropy_threshold = static_cast<float>(tau);
      c.recent_k = sweep_k;
      settings.push_back({dname, absl::StrCat("entropy:tau=", tau, ",k=", sweep_k), decoding, c});
    }
    // Warm-up (untimed): first-touch of weights and allocator pools would otherwise be
    // charged to the `none` baseline.
    RunSetting(
        **engine, timer,
        std::vector<Task>(tasks.begin(), tasks.begin() + std::min<size_t>(tasks.size(), o.batch)),
        settings[0], o.gen_length);
    double none_tps = 0;
    for (size_t s = 0; s < settings.size(); ++s) {
      const Setting& setting = settings[s];
      collector.Take();
      const Result r = RunSetting(**engine, timer, tasks, setting, o.gen_length,
                                  static_cast<float>(o.shadow), shadows ? o.batch : 0);
      const std::vector<ShadowSample> samples = collector.Take();
      if (!r.rejected.empty()) {
        nlohmann::json j;
        j["decoding"] = DecodingJson(setting.decoding);
        j["policy"] = PolicyName(setting.cache.policy);
        j["params"] = PolicyParams(setting.cache);
        j["error"] = r.rejected;
        std::cout << j.dump() << std::endl;
        if (s == 0) Die("the none baseline was rejected: " + r.rejected);
        continue;
      }
      if (s == 0) none_tps = r.tokens_per_s;  // settings[0] is always `none`
      const double speedup = none_tps > 0 ? r.tokens_per_s / none_tps : 0;
      nlohmann::json j =
          RowJson(info, setting, r, tasks.size(), o.gen_length, o.batch, entropy_cost);
      j["speedup_vs_none"] = Round(speedup, 3);
      j["speedup_vs_baseline"] =
          Round(base.tokens_per_s > 0 ? r.tokens_per_s / base.tokens_per_s : 0, 3);
      j["vs_baseline"] = PairedJson(r, base);
      if (shadows) {
        j["shadow"] = ShadowJson(
            samples,
            setting.cache.shadow_sample_rate.value_or(static_cast<float>(std::max(o.shadow, 0.0))),
            r.wall_s);
      }
      std::cout << j.dump() << std::endl;
      if (shadow_csv.is_open()) {
        // Empty drift cells: the step had no position in that region.
        auto cell = [](const KvDrift& d) {
          return d.positions > 0 && d.layers > 0 ? absl::StrCat(d.kv) : std::string();
        };
        for (const auto& s : samples) {
          shadow_csv << '"' << dname << "\"," << PolicyName(setting.cache.policy) << ","
                     << setting.cache.entropy_threshold << "," << setting.cache.recent_k << ","
                     << s.request_id << "," << s.step << "," << s.entropy << "," << s.kl_mean << ","
                     << s.kl_max << "," << (s.decision_mismatch ? 1 : 0) << "," << s.max_prob_change
                     << "," << s.committed << "," << (s.token_mismatch ? 1 : 0);
          for (int reg = 0; reg < kShadowRegions; ++reg) {
            shadow_csv << "," << cell(s.drift[reg]);
            for (int g = 0; g < kShadowLayerGroups; ++g)
              shadow_csv << "," << cell(s.drift_by_group[reg][g]);
          }
          shadow_csv << "\n";
        }
      }
      if (s >= caches.size() && csv.is_open()) {
        if (sweep_series.empty() || sweep_series.back().decoding != dname) {
          const int next_row =
              sweep_series.empty() ? 0 : sweep_series.back().first_row + sweep_series.back().rows;
          sweep_series.push_back({dname, next_row, 0});
        }
        ++sweep_series.back().rows;
        csv << '"' << dname << '"' << "," << setting.cache.entropy_threshold << ","
            << setting.cache.recent_k << "," << r.accuracy << "," << r.tokens_per_s << ","
            << speedup << "," << r.full_step_ratio << "," << r.rows_per_step << ","
            << (base.tokens_per_s > 0 ? r.tokens_per_s / base.tokens_per_s : 0);
        // Cache-quality columns stay empty without --shadow (and drift cells for regions
        // that no sampled step had).
        const nlohmann::json q = shadows ? j["shadow"] : nlohmann::json();
        csv << "," << (q.is_null() ? "" : absl::StrCat(q["samples"].get<size_t>())) << ","
            << (q.is_null() ? "" : absl::StrCat(q["mismatch_rate"].get<double>())) << ","
            << (q.is_null() ? "" : absl::StrCat(q["mean_kl"].get<double>()));
        for (int reg = 0; reg < kShadowRegions; ++reg) {
          const char* name = ShadowRegionName(reg);
          csv << ",";
          if (!q.is_null() && q["mean_kv_drift"].contains(name))
            csv << q["mean_kv_drift"][name].get<double>();
        }
        csv << "," << (q.is_null() ? "" : absl::StrCat(q["token_mismatch_rate"].get<double>()));
        csv << "\n";
      }
    }
  }
  (*engine)->Drain(absl::Seconds(5));
  if (csv.is_open()) {
    csv.close();
    if (sweep_series.empty()) {
      std::cerr << "dllm-bench: every sweep setting was rejected; no plot\n";
      return 0;
    }
    const std::string script = o.sweep_out + ".gp";
    std::ofstream gp(script);
    gp << "set terminal png size 900,600\n"
       << "set output '" << o.sweep_out << ".png'\n"
       << "set datafile separator ','\n"
       << "set key autotitle columnhead\n"
       << "set xlabel 'speedup vs baseline (" << o.baseline_spec << ")'\n"
       << "set ylabel 'accuracy'\n"
       << "set title 'EntropyCache: accuracy vs speed (labels: tau)'\n"
       << "set termoption noenhanced\n"
       << "set key bottom right\n"
       << "plot";
    // One line per decoding; its tau labels above (even series) or below (odd) the points.
    for (size_t i = 0; i < sweep_series.size(); ++i) {
      const SweepSeries& ss = sweep_series[i];
      const std::string rows =
          absl::StrCat(" every ::", ss.first_row, "::", ss.first_row + ss.rows - 1);
      gp << (i ? ", \\\n " : " ") << "'" << o.sweep_out << ".csv'" << rows
         << " using 9:4 with linespoints title '" << absl::StrReplaceAll(ss.decoding, {{"'", "''"}})
         << "', '" << o.sweep_out << ".csv'" << rows
         << " using 9:4:(sprintf('%.2f',$2)) with labels offset 0," << (i % 2 ? -1 : 1)
         << " notitle";
    }
    gp << "\n";
    gp.close();
    const std::string cmd = "gnuplot '" + script + "'";
    if (std::system(cmd.c_str()) != 0)
      std::cerr << "dllm-bench: gnuplot failed; CSV kept\n";
    else
      std::cerr << "dllm-bench: wrote " << o.sweep_out << ".csv and " << o.sweep_out << ".png\n";
  }
  return 0;
}

}  // namespace
}  // namespace dllm

int main(int argc, char** argv) {
  // A bench run that throws (a thread or an allocation that fails under memory pressure)
  // says so and exits 1 rather than aborting (tests/dllm_bench/out_of_memory.cmake).
  try {
    return dllm::Main(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "dllm-bench: " << e.what() << "\n";
  } catch (...) {
    std::cerr << "dllm-bench: unknown exception\n";
  }
  return 1;
}
