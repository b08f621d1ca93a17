#include "bench/dllm_bench_spec.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "cli/flags.h"
#include "engine/core/model_family.h"
#include "engine/core/param_fields.h"
#include "engine/tokenizer/tokenizer.h"
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
ABSL_FLAG(bool, none, true,
          "run `none` first in every decoding, the reference of speedup_vs_none (--none=false: "
          "only when a --policy names it)");
ABSL_FLAG(std::string, answers_out, "", "JSONL: every setting's row with its per-task answers");
ABSL_FLAG(std::string, baseline_from, "",
          "an --answers-out file whose first line is the baseline: reused, not run again");

namespace dllm::bench {
namespace {

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

TauAutotuneOptions ParseAutotune(const std::string& spec, double shadow) {
  TauAutotuneOptions tune;
  if (spec.empty()) return tune;
  if (!(shadow > 0)) Die("--autotune needs --shadow RATE > 0 (it learns from shadow samples)");
  std::vector<std::string> parts = absl::StrSplit(spec, ':');
  if (parts.size() > 2) Die("--autotune expects BUDGET[:WINDOW]");
  tune.enabled = true;
  tune.mismatch_budget = ToDouble("--autotune", parts[0]);
  tune.window_samples = parts.size() == 2 ? ToInt("--autotune", parts[1]) : 20;
  if (absl::Status st = ValidateTauAutotuneOptions(tune, static_cast<float>(shadow)); !st.ok()) {
    Die("--autotune: " + std::string(st.message()));
  }
  return tune;
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

// One line of the task file; line_no names it in the error.
Task ParseTask(const std::string& line, const std::string& path, int line_no) {
  nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
  if (j.is_discarded() || !j.contains("prompt") || !j.contains("answer") ||
      !j["prompt"].is_string() || !j["answer"].is_string()) {
    Die(absl::StrCat(path, ":", line_no, ": expected {\"prompt\": str, \"answer\": str}"));
  }
  Task task{j["prompt"], j["answer"], "", "", {}};
  for (auto [key, field] : {std::pair{"final", &task.final}, {"family", &task.family}}) {
    if (!j.contains(key)) continue;
    if (!j[key].is_string()) Die(absl::StrCat(path, ":", line_no, ": bad ", key));
    *field = j[key];
  }
  if (j.contains("canvas")) {
    const std::string bad = absl::StrCat(
        path, ":", line_no, ": expected \"canvas\": [{\"fixed\"|\"masks_for\": str}, ...]");
    if (!j["canvas"].is_array() || j["canvas"].empty()) Die(bad);
    for (const nlohmann::json& piece : j["canvas"]) {
      if (!piece.is_object() || piece.size() != 1) Die(bad);
      const bool fixed = piece.contains("fixed");
      const nlohmann::json& text =
          fixed ? piece["fixed"] : piece.value("masks_for", nlohmann::json());
      if (!text.is_string()) Die(bad);
      task.canvas.push_back(CanvasPiece{fixed, text});
    }
  }
  return task;
}

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
  const ModelFamilyInfo* family = FamilyByModelType(info.family);
  s.decoding.remasking = family != nullptr ? family->vanilla_remasking : Remasking::kLowConfidence;
  s.cache = CacheParams{};
  return s;
}

// The model's default decoding, its block cut to the answer length.
DecodingParams DefaultDecoding(const ModelInfo& info, int gen_length) {
  DecodingParams d = info.default_decoding;
  if (d.schedule == Schedule::kBlock) d.block_length = std::min(d.block_length, gen_length);
  return d;
}

// The sweep's k: the first entropy policy's, else 32.
int SweepK(const Policies& policies) {
  for (const CacheParams& c : policies.caches)
    if (c.policy == CachePolicyKind::kEntropy) return c.recent_k;
  return 32;
}

}  // namespace

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
        o.answers_out = absl::GetFlag(FLAGS_answers_out);
        o.add_none = absl::GetFlag(FLAGS_none);
        o.baseline_from = absl::GetFlag(FLAGS_baseline_from);
        return absl::OkStatus();
      });
  if (!st.ok()) return st;
  return o;
}

TauAutotuneOptions CheckBenchOptions(const BenchOptions& o) {
  if (o.model_dir.empty() || o.tasks_path.empty()) Die("--model and --tasks are required");
  if (o.batch < 1) Die("--batch must be >= 1");
  if (o.gen_length < 0) Die("--gen-length must be >= 1");
  if (o.shadow > 1) Die("--shadow must be in [0, 1]");
  if (!o.shadow_out.empty() && o.shadow < 0) Die("--shadow-out needs --shadow");
  if (!(o.shadow_budget > 0)) Die("--shadow-budget must be > 0");
  return ParseAutotune(o.autotune, o.shadow);
}

[[noreturn]] void Die(const std::string& message) {
  std::cerr << "dllm-bench: " << message << "\n";
  std::exit(2);
}

std::vector<Task> ReadTasks(const std::string& path, int limit) {
  std::vector<Task> tasks;
  std::ifstream in(path);
  if (!in) Die("cannot open " + path);
  std::string line;
  int line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (Trim(line).empty()) continue;
    tasks.push_back(ParseTask(line, path, line_no));
    if (limit > 0 && static_cast<int>(tasks.size()) >= limit) break;
  }
  if (tasks.empty()) Die("no tasks in " + path);
  return tasks;
}

absl::StatusOr<std::vector<int32_t>> CanvasIds(const Task& task, const Tokenizer& tokenizer,
                                               int32_t mask_token_id, int gen_length) {
  std::vector<int32_t> ids;
  if (task.canvas.empty()) return ids;
  for (const CanvasPiece& piece : task.canvas) {
    std::vector<int32_t> piece_ids = tokenizer.Encode(piece.text);
    if (!piece.fixed) std::fill(piece_ids.begin(), piece_ids.end(), mask_token_id);
    ids.insert(ids.end(), piece_ids.begin(), piece_ids.end());
  }
  if (ids.size() >= static_cast<size_t>(gen_length)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the canvas pieces of the task with prompt \"", task.prompt.substr(0, 40), "...\" take ",
        ids.size(), " tokens, leaving no mask in --gen-length ", gen_length));
  }
  ids.resize(gen_length, mask_token_id);
  return ids;
}

bool Correct(const Task& task, const std::string& text) {
  if (task.final.empty()) return Trim(text) == Trim(task.answer);
  return FinalLine(text) == task.final;
}

DecodingParams ParseDecoding(const std::string& spec, const DecodingParams& defaults, int gen) {
  std::string head;
  auto opts = ParseOptions(spec, &head);
  const std::optional<Schedule> schedule = ParseSchedule(head);
  if (!schedule) Die("unknown decoding '" + head + "' (block|window|timestep)");
  // The model's defaults moved to the head's schedule (so the families' window threshold does
  // not carry into "block"), then the head's own knobs.
  DecodingParams d = DefaultsForSchedule(defaults, *schedule);
  switch (*schedule) {
    case Schedule::kBlock:
      if (defaults.schedule != Schedule::kBlock) d.remasking = Remasking::kLowConfidence;
      d.block_length = std::min(32, gen);
      break;
    case Schedule::kWindow:
      if (d.remasking == Remasking::kOrigin) d.remasking = Remasking::kLowConfidence;
      d.window = 16;
      d.confidence_threshold = 0.9f;
      break;
    case Schedule::kTimestep:
      if (defaults.schedule != Schedule::kTimestep) d.remasking = Remasking::kEntropy;
      d.confidence_threshold = 0;
      break;
  }
  CacheParams unused;
  ApplySpecOptions(ParamSection::kDecoding, opts, spec, &d, &unused);
  return d;
}

CacheParams ParsePolicy(const std::string& spec, std::optional<int>* logprobs) {
  std::string head;
  auto opts = ParseOptions(spec, &head);
  if (auto it = opts.find("logprobs"); it != opts.end() && logprobs != nullptr) {
    *logprobs = ToInt(it->first, it->second);
    opts.erase(it);
  }
  CacheParams c;
  std::optional<CachePolicyKind> policy = ParseCachePolicy(head);
  if (!policy) Die("unknown policy '" + head + "' (" + CachePolicyNames() + ")");
  c.policy = *policy;
  DecodingParams unused;
  ApplySpecOptions(ParamSection::kCache, opts, spec, &unused, &c);
  return c;
}

Setting ParseBaseline(const std::string& spec, const ModelInfo& info, int gen_length) {
  if (spec == "vanilla") return VanillaSetting(info, gen_length);
  std::pair<std::string, std::string> parts = absl::StrSplit(spec, absl::MaxSplits('@', 1));
  Setting s;
  s.decoding_spec = parts.first;
  s.policy_spec = parts.second.empty() ? "none" : parts.second;
  s.decoding = ParseDecoding(parts.first, info.default_decoding, gen_length);
  s.cache = ParsePolicy(s.policy_spec, &s.logprobs);
  return s;
}

Policies ParsePolicies(const std::vector<std::string>& specs, bool add_none) {
  Policies p;
  bool has_none = !add_none;
  for (const std::string& spec : specs) {
    p.logprobs.emplace_back();
    p.caches.push_back(ParsePolicy(spec, &p.logprobs.back()));
    p.specs.push_back(spec);
    has_none |= p.caches.back().policy == CachePolicyKind::kNone;
  }
  if (!has_none) {
    p.caches.insert(p.caches.begin(), CacheParams{});
    p.specs.insert(p.specs.begin(), "none");
    p.logprobs.insert(p.logprobs.begin(), std::nullopt);
  }
  return p;
}

std::vector<double> ParseSweepTaus(const std::string& sweep) {
  std::vector<double> taus;
  if (sweep.empty()) return taus;
  absl::string_view rest(sweep);
  if (!absl::ConsumePrefix(&rest, "tau=")) Die("--sweep expects tau=a:b:n or tau=t1,t2,...");
  if (absl::StrContains(rest, ',')) {
    // An explicit list: entropies of small models span decades (1e-7 .. 1 nats), which a
    // linear grid cannot cover.
    for (absl::string_view t : absl::StrSplit(rest, ','))
      taus.push_back(ToDouble("sweep", std::string(t)));
  } else {
    std::vector<std::string> parts = absl::StrSplit(rest, ':');
    if (parts.size() != 3) Die("--sweep expects tau=a:b:n or tau=t1,t2,...");
    const double a = ToDouble("sweep", parts[0]), b = ToDouble("sweep", parts[1]);
    const int n = ToInt("sweep", parts[2]);
    if (n < 1) Die("--sweep n must be >= 1");
    for (int i = 0; i < n; ++i) taus.push_back(n == 1 ? a : a + (b - a) * i / (n - 1));
  }
  return taus;
}

std::vector<Setting> DecodingSettings(const std::string& decoding_spec, const ModelInfo& info,
                                      int gen_length, const Policies& policies,
                                      const std::vector<double>& sweep_taus) {
  const DecodingParams decoding =
      decoding_spec.empty() ? DefaultDecoding(info, gen_length)
                            : ParseDecoding(decoding_spec, info.default_decoding, gen_length);
  const std::string dname = decoding_spec.empty() ? "default" : decoding_spec;
  std::vector<Setting> settings;
  for (size_t i = 0; i < policies.caches.size(); ++i)
    settings.push_back(
        {dname, policies.specs[i], decoding, policies.caches[i], policies.logprobs[i]});
  const int sweep_k = SweepK(policies);
  for (double tau : sweep_taus) {
    CacheParams c;
    c.policy = CachePolicyKind::kEntropy;
    c.entropy_threshold = static_cast<float>(tau);
    c.recent_k = sweep_k;
    settings.push_back({dname, absl::StrCat("entropy:tau=", tau, ",k=", sweep_k), decoding, c});
  }
  return settings;
}

}  // namespace dllm::bench
