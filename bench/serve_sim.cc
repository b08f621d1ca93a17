// dllm-serve-sim: a serving run of the real engine in virtual time.
//
// The production engine (its worker, scheduler, sequences and cache policies, and the model's
// real logits) serves a list of timed requests in process. With --profile, a virtual clock
// replaces the wall clock: each step advances it by the latency model's time for what the
// step computed (bench/latency_model.h), requests arrive at their virtual times, and every
// deadline and timing is read from it. Because the engine is batch-invariant, the tokens are
// those a real server would produce; only the time is the model's. Without --profile the run
// is in real time (requests sent at their wall-clock offsets), and --steps-out records each
// step's cost next to its measured seconds: the calibration data of a CPU profile.
//
// bench/serve_sim.py builds the request list (serve.py's arrival process and workload) and
// turns the results into serve.py's rows; docs/serving-simulation.md has the method.
//
// Input (--requests, JSONL), one request per line:
//   {"arrival_s": 0.25, "prompt": "...", "max_tokens": 192, "label": "entropy",
//    "setting": {"decoding": {"schedule": "window", ...}, "cache": {"policy": "entropy"}},
//    "deadline_s": 4.0}
// The prompt is one user message (the model's chat template); unset fields take the model
// family's defaults, as in dllm-server. deadline_s (optional, > 0): the request's deadline,
// seconds after its arrival, as a gRPC client's deadline (the engine ends it there, and its
// cost-aware admission may refuse it at arrival).
// Output (--out, JSONL), one line per request in input order:
//   {"index", "label", "status" (OK or the status code's name), "output_tokens", "text",
//    "arrival_s", "chunks_s" (times of the commits that carried text), "steps_s" (the end of
//    each of its steps), "end_s", "steps", "rows",
//    "tau_switch_step" (SequenceStats::tau_switch_step; -1: never switched),
//    "mean_tau_nats" (mean EntropyCache tau of its steps; null for other policies),
//    "shadow" {"samples", "token_mismatches", "samples_under_load",
//    "token_mismatches_under_load"} (its shadow samples, --shadow-sample-rate)}
// --steps-out (JSONL), one line per step: {"rows", "key_rows", "map_key_rows",
//   "predicted_rows", "sequences", "full_sequences", "partial_sequences", "seconds" (measured
//   wall time of the step), "virtual_seconds" (the profile's, with --profile)}.
//
// Usage: dllm-serve-sim --model DIR --requests FILE --out FILE [--profile FILE]
//          [--steps-out FILE] [--max-batch 8] [--queue-capacity 256] [--threads 0]
//          [--kv-budget-bytes 1073741824] [--refuse-late-requests=false]
//          [--tau-switch-slack-ratio 3] [--shadow-sample-rate 0] [--mismatch-budget 0]
// --shadow-sample-rate: cache.shadow_sample_rate; --mismatch-budget > 0 turns cache.autotune
// on with that budget (0: off). A shadow forward is not charged to virtual time (it runs
// outside the step's passes); a server caps it at cache.shadow_max_time_fraction.
// Exit: 0 when every request ended (whatever its status), 2 on bad input, 1 otherwise.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <exception>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "bench/latency_model.h"
#include "bench/step_cost_executor.h"
#include "bench/virtual_clock.h"
#include "cli/flags.h"
#include "engine/core/param_fields.h"
#include "engine/engine.h"
#include "engine/engine_impl.h"
#include "engine/model/loaded_model.h"
#include "nlohmann/json.hpp"

ABSL_FLAG(std::string, model, "", "model folder (required)");
ABSL_FLAG(std::string, requests, "", "JSONL of timed requests (required)");
ABSL_FLAG(std::string, out, "", "JSONL of per-request results (required)");
ABSL_FLAG(std::string, profile, "", "latency profile: virtual time (default: real time)");
ABSL_FLAG(std::string, steps_out, "", "JSONL of per-step costs and times");
ABSL_FLAG(int, max_batch, 8, "engine.max_batch_sequences");
ABSL_FLAG(int, queue_capacity, 256, "engine.queue_capacity");
ABSL_FLAG(int, threads, 0, "CPU threads (0: one per hardware thread)");
ABSL_FLAG(int64_t, kv_budget_bytes, int64_t{1} << 30, "engine.kv_budget_bytes");
ABSL_FLAG(bool, refuse_late_requests, true, "engine.refuse_late_requests (cost-aware admission)");
ABSL_FLAG(double, tau_switch_slack_ratio, 3, "engine.tau_switch_slack_ratio (SLO-aware tau)");
ABSL_FLAG(double, shadow_sample_rate, 0, "cache.shadow_sample_rate");
ABSL_FLAG(double, mismatch_budget, 0,
          "cache.autotune.mismatch_budget with autotune on (0: autotune off)");

namespace dllm::bench {
namespace {

struct Options {
  std::string model_dir, requests_path, out_path, profile_path, steps_path;
  int max_batch = 8, queue_capacity = 256, threads = 0;
  int64_t kv_budget_bytes = int64_t{1} << 30;
  bool refuse_late_requests = true;
  double tau_switch_slack_ratio = 3;
  double shadow_sample_rate = 0;
  double mismatch_budget = 0;
};

struct TimedRequest {
  double arrival_s = 0;
  std::optional<double> deadline_s;  // after arrival
  std::string label;
  GenerationRequest request;
};

struct Result {
  std::string status = "NOT_SENT";
  int output_tokens = 0;
  std::string text;
  std::vector<double> chunks_s;
  std::vector<double> steps_s;  // the end of each of its denoising steps
  double end_s = 0;
  int steps = 0;
  int64_t rows = 0;
  int tau_switch_step = -1;
  double tau_sum = 0;              // EntropyCache tau of its steps, summed (NaN: another policy)
  int shadow_samples[2] = {0, 0};  // [own tau, under load]
  int shadow_token_mismatches[2] = {0, 0};  // the same split
};

// Sets `field`'s value in `decoding`/`cache` from a JSON scalar (numbers as written, strings
// as enum names or numbers).
absl::Status ApplySetting(const nlohmann::json& setting, DecodingParams* decoding,
                          CacheParams* cache) {
  if (!setting.is_object()) return absl::InvalidArgumentError("\"setting\" must be an object");
  ParamOverrides overrides;
  for (const auto& [section_name, fields] : setting.items()) {
    ParamSection section;
    if (section_name == "decoding") {
      section = ParamSection::kDecoding;
    } else if (section_name == "cache") {
      section = ParamSection::kCache;
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("\"setting\": unknown section \"", section_name, "\""));
    }
    if (!fields.is_object()) {
      return absl::InvalidArgumentError(absl::StrCat("\"", section_name, "\" must be an object"));
    }
    for (const auto& [name, value] : fields.items()) {
      const ParamField* field = FindParamField(section, name);
      if (field == nullptr) {
        return absl::InvalidArgumentError(absl::StrCat("unknown field ", section_name, ".", name));
      }
      const std::string text = value.is_string() ? value.get<std::string>() : value.dump();
      absl::StatusOr<ParamValue> v = ParseParamText(*field, text);
      if (!v.ok()) return v.status();
      overrides.Set(*field, *v);
    }
  }
  overrides.ApplyTo(decoding, cache);
  return overrides.CheckReadBy(*decoding);  // as the server checks a request
}

absl::StatusOr<std::vector<TimedRequest>> ReadRequests(const std::string& path,
                                                       const ModelInfo& info) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::vector<TimedRequest> out;
  std::string line;
  double last_arrival = 0;
  for (int number = 1; std::getline(in, line); ++number) {
    if (line.empty()) continue;
    auto bad = [&](absl::string_view why) {
      return absl::InvalidArgumentError(absl::StrCat(path, ":", number, ": ", why));
    };
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (!j.is_object()) return bad("not a JSON object");
    if (!j.contains("arrival_s") || !j["arrival_s"].is_number()) {
      return bad("\"arrival_s\" (seconds) is required");
    }
    if (!j.contains("prompt") || !j["prompt"].is_string()) return bad("\"prompt\" is required");
    TimedRequest r;
    r.arrival_s = j["arrival_s"].get<double>();
    if (!(r.arrival_s >= last_arrival)) return bad("arrivals must be >= 0 and in order");
    last_arrival = r.arrival_s;
    r.label = j.value("label", "");
    if (j.contains("deadline_s")) {
      if (!j["deadline_s"].is_number() || !(j["deadline_s"].get<double>() > 0)) {
        return bad("\"deadline_s\" must be a number of seconds > 0");
      }
      r.deadline_s = j["deadline_s"].get<double>();
    }
    r.request.id = absl::StrCat(out.size());
    r.request.messages.push_back(ChatMessage{"user", j["prompt"].get<std::string>()});
    r.request.max_new_tokens = j.value("max_tokens", info.default_max_new_tokens);
    r.request.decoding = info.default_decoding;
    r.request.cache = info.default_cache;
    r.request.step_events = true;  // the time of each of its steps (Result::steps_s)
    if (j.contains("setting")) {
      if (absl::Status s = ApplySetting(j["setting"], &r.request.decoding, &r.request.cache);
          !s.ok()) {
        return bad(s.message());
      }
    }
    out.push_back(std::move(r));
  }
  if (out.empty()) return absl::InvalidArgumentError(absl::StrCat(path, ": no request"));
  return out;
}

// The run: the engine, the clock, the arrivals not yet sent and the results.
class Simulation final : public EngineObserver {
 public:
  Simulation(const Options& options, std::vector<TimedRequest> requests,
             std::optional<LatencyModel> model)
      : options_(options),
        requests_(std::move(requests)),
        results_(requests_.size()),
        model_(std::move(model)) {}

  absl::Status Start(std::unique_ptr<LoadedModel> loaded) {
    const int layers = loaded->config.num_layers;
    auto executor = std::make_unique<StepCostExecutor>(
        MakeTransformerExecutor(loaded->transformer.get(), loaded->kv_pool.get()), layers,
        [this](const StepCost& so_far, const StepCost&) { OnPass(so_far); });
    executor_ = executor.get();
    EngineOptions eo;
    eo.model_dir = options_.model_dir;
    eo.max_batch_sequences = options_.max_batch;
    eo.queue_capacity = options_.queue_capacity;
    eo.kv_budget_bytes = options_.kv_budget_bytes;
    eo.refuse_late_requests = options_.refuse_late_requests;
    eo.tau_switch_slack_ratio = options_.tau_switch_slack_ratio;
    eo.shadow.sample_rate = static_cast<float>(options_.shadow_sample_rate);
    eo.shadow.tau_autotune.enabled = options_.mismatch_budget > 0;
    if (options_.mismatch_budget > 0) {
      eo.shadow.tau_autotune.mismatch_budget = options_.mismatch_budget;
    }
    eo.max_new_tokens_limit = 1 << 20;
    eo.observer = this;
    if (model_) eo.clock = &clock_;
    absl::StatusOr<std::unique_ptr<Engine>> engine =
        CreateEngineFromLoadedModel(eo, std::move(loaded), std::move(executor));
    if (!engine.ok()) return engine.status();
    engine_ = std::move(*engine);
    return absl::OkStatus();
  }

  // Sends every request at its time and returns once each has ended and the engine has
  // stopped (its worker may still end the step in which the last request finished, calling
  // OnStep, after the last final event).
  void Run() {
    wall_start_ = std::chrono::steady_clock::now();
    if (model_) {
      RunVirtual();
    } else {
      RunReal();
    }
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](int* outstanding) { return *outstanding == 0; }, &outstanding_));
    }
    engine_.reset();
    executor_ = nullptr;
  }

  void Write(std::FILE* out) const {
    for (size_t i = 0; i < results_.size(); ++i) {
      const Result& r = results_[i];
      nlohmann::json j = {
          {"index", i},
          {"label", requests_[i].label},
          {"status", r.status},
          {"output_tokens", r.output_tokens},
          {"text", r.text},
          {"arrival_s", requests_[i].arrival_s},
          {"chunks_s", r.chunks_s},
          {"steps_s", r.steps_s},
          {"end_s", r.end_s},
          {"steps", r.steps},
          {"rows", r.rows},
          {"tau_switch_step", r.tau_switch_step},
          {"mean_tau_nats", r.steps > 0 && !std::isnan(r.tau_sum)
                                ? nlohmann::json(r.tau_sum / r.steps)
                                : nlohmann::json(nullptr)},
          {"shadow",
           {{"samples", r.shadow_samples[0] + r.shadow_samples[1]},
            {"token_mismatches", r.shadow_token_mismatches[0] + r.shadow_token_mismatches[1]},
            {"samples_under_load", r.shadow_samples[1]},
            {"token_mismatches_under_load", r.shadow_token_mismatches[1]}}}};
      std::fprintf(out, "%s\n",
                   j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    }
  }

  double now_s() const {
    if (model_) return clock_.elapsed_s();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start_).count();
  }
  double wall_s() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start_).count();
  }
  void set_steps_out(std::FILE* f) { steps_out_ = f; }

  // EngineObserver: every step ends here (worker thread).
  void OnStep(const StepInfo& info) override {
    const StepCost cost = executor_->EndStep();
    charged_s_ = 0;
    if (steps_out_ == nullptr) return;
    nlohmann::json j = {{"rows", cost.rows},
                        {"key_rows", cost.key_rows},
                        {"map_key_rows", cost.map_key_rows},
                        {"predicted_rows", cost.predicted_rows},
                        {"sequences", cost.sequences},
                        {"full_sequences", info.full_sequences},
                        {"partial_sequences", info.partial_sequences},
                        {"seconds", info.seconds}};
    if (model_) j["virtual_seconds"] = model_->Seconds(cost);
    std::fprintf(steps_out_, "%s\n", j.dump().c_str());
  }

  // EngineObserver: a shadow sample (worker thread, before its step's commits), counted for
  // its request (ids are input indices).
  void OnShadowSample(const ShadowSample& sample) override {
    size_t index = 0;
    if (!absl::SimpleAtoi(sample.request_id, &index) || index >= results_.size()) return;
    Result& r = results_[index];
    const int kind = sample.under_load ? 1 : 0;
    ++r.shadow_samples[kind];
    if (sample.token_mismatch) ++r.shadow_token_mismatches[kind];
  }

 private:
  class Sink final : public EventSink {
   public:
    Sink(Simulation* sim, size_t index) : sim_(sim), index_(index) {}
    void OnCommit(const CommitEvent& event) override {
      if (!event.text_delta.empty()) sim_->results_[index_].chunks_s.push_back(sim_->now_s());
    }
    void OnStep(const StepEvent& event) override {
      Result& r = sim_->results_[index_];
      r.steps_s.push_back(sim_->now_s());
      r.tau_sum += event.tau_nats;  // NaN for policies without a tau, and stays NaN
    }
    void OnFinal(const FinalEvent& event) override {
      Result& r = sim_->results_[index_];
      r.status = event.status.ok() ? "OK" : absl::StatusCodeToString(event.status.code());
      r.output_tokens = event.stats.generated_tokens;
      r.text = event.text;
      r.end_s = sim_->now_s();
      r.steps = event.stats.steps;
      r.rows = event.stats.rows_computed;
      r.tau_switch_step = event.stats.tau_switch_step;
      absl::MutexLock lock(&sim_->mu_);
      --sim_->outstanding_;
    }

   private:
    Simulation* sim_;
    size_t index_;
  };

  // Sends request `i` now. A refusal ends it at once with its status.
  void Send(size_t i) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    ++outstanding_;
    GenerationRequest request = requests_[i].request;
    if (requests_[i].deadline_s.has_value()) {
      const absl::Time now = model_ ? clock_.Now() : absl::Now();
      request.deadline = now + absl::Seconds(*requests_[i].deadline_s);
    }
    absl::StatusOr<RequestId> id =
        engine_->Submit(std::move(request), std::make_shared<Sink>(this, i));
    if (!id.ok()) {
      results_[i].status = absl::StatusCodeToString(id.status().code());
      results_[i].text = std::string(id.status().message());
      // When the refusal came back: in virtual time at once; in real time as measured.
      results_[i].end_s = now_s();
      --outstanding_;
    }
  }

  void RunReal() {
    for (size_t i = 0; i < requests_.size(); ++i) {
      const double wait = requests_[i].arrival_s - wall_s();
      if (wait > 0) std::this_thread::sleep_for(std::chrono::duration<double>(wait));
      absl::MutexLock lock(&mu_);
      Send(i);
    }
  }

  // The engine idles only when nothing is outstanding: then time jumps to the next arrival,
  // and that one request is sent. While the engine works, arrivals are sent from OnPass, at
  // the end of the step they fall in, so the worker (which admits at step boundaries) sees
  // them exactly where a real server would, and a run repeats to the bit. Requests that
  // arrive at the same instant while the engine idles (a burst) are the exception: the
  // first starts alone and the others join at the end of its first step. Sending them
  // together would race the worker's admission of the first.
  void RunVirtual() {
    absl::MutexLock lock(&mu_);
    while (next_ < requests_.size()) {
      mu_.Await(absl::Condition(
          +[](Simulation* s) ABSL_NO_THREAD_SAFETY_ANALYSIS {
            return s->outstanding_ == 0 || s->next_ >= s->requests_.size();
          },
          this));
      if (next_ >= requests_.size()) break;
      clock_.Set(std::max(clock_.elapsed_s(), requests_[next_].arrival_s));
      Send(next_++);
    }
  }

  // After each forward pass (worker thread): the clock moves to the step's end as the model
  // prices it, and the requests that arrived meanwhile are sent, each at its own time.
  void OnPass(const StepCost& so_far) {
    if (!model_) return;
    const double charged = model_->Seconds(so_far);
    const double end = clock_.elapsed_s() + (charged - charged_s_);
    charged_s_ = charged;
    absl::MutexLock lock(&mu_);
    while (next_ < requests_.size() && requests_[next_].arrival_s <= end) {
      clock_.Set(std::max(clock_.elapsed_s(), requests_[next_].arrival_s));
      Send(next_++);
    }
    clock_.Set(end);
  }

  const Options options_;
  const std::vector<TimedRequest> requests_;
  std::vector<Result> results_;  // each written by its request's sink (worker thread) only
  const std::optional<LatencyModel> model_;
  VirtualClock clock_;
  StepCostExecutor* executor_ = nullptr;  // owned by engine_
  std::unique_ptr<Engine> engine_;
  std::chrono::steady_clock::time_point wall_start_;
  std::FILE* steps_out_ = nullptr;
  double charged_s_ = 0;  // worker thread: the current step's time charged so far

  absl::Mutex mu_;
  size_t next_ ABSL_GUARDED_BY(mu_) = 0;
  int outstanding_ ABSL_GUARDED_BY(mu_) = 0;
};

int Main(const Options& o) {
  auto fail = [](absl::string_view message, int code) {
    std::fprintf(stderr, "dllm-serve-sim: %s\n", std::string(message).c_str());
    return code;
  };
  std::optional<LatencyModel> model;
  if (!o.profile_path.empty()) {
    absl::StatusOr<LatencyModel> m = LatencyModel::FromFile(o.profile_path);
    if (!m.ok()) return fail(m.status().message(), 2);
    model = std::move(*m);
  }
  LoadOptions load;
  load.model_dir = o.model_dir;
  load.cpu_threads = o.threads;
  load.kv_budget_bytes = o.kv_budget_bytes;
  absl::StatusOr<std::unique_ptr<LoadedModel>> loaded = LoadModel(load);
  if (!loaded.ok()) return fail(loaded.status().message(), 2);
  const ModelInfo info = MakeModelInfo((*loaded)->config, o.model_dir, (*loaded)->generation);
  absl::StatusOr<std::vector<TimedRequest>> requests = ReadRequests(o.requests_path, info);
  if (!requests.ok()) return fail(requests.status().message(), 2);

  std::FILE* steps = nullptr;
  if (!o.steps_path.empty() && (steps = std::fopen(o.steps_path.c_str(), "w")) == nullptr) {
    return fail(absl::StrCat("cannot write ", o.steps_path), 2);
  }
  std::FILE* out = std::fopen(o.out_path.c_str(), "w");
  if (out == nullptr) return fail(absl::StrCat("cannot write ", o.out_path), 2);

  const size_t n = requests->size();
  Simulation sim(o, std::move(*requests), std::move(model));
  sim.set_steps_out(steps);
  if (absl::Status s = sim.Start(std::move(*loaded)); !s.ok()) return fail(s.message(), 1);
  sim.Run();
  sim.Write(out);
  std::fclose(out);
  if (steps != nullptr) std::fclose(steps);
  std::fprintf(stderr, "dllm-serve-sim: %zu requests, %.3f s %s, %.3f s of wall time\n", n,
               sim.now_s(), o.profile_path.empty() ? "real" : "virtual", sim.wall_s());
  return 0;
}

// The command line, then Main.
int Run(int argc, char** argv) {
  constexpr const char* kUsage =
      "usage: dllm-serve-sim --model DIR --requests FILE --out FILE [--profile FILE] "
      "[--steps-out FILE] [--max-batch 8] [--queue-capacity 256] [--threads 0] "
      "[--kv-budget-bytes N] [--refuse-late-requests=false] [--tau-switch-slack-ratio 3] "
      "[--shadow-sample-rate 0] [--mismatch-budget 0]\n";
  Options o;
  bool help = false;
  const absl::Status st = dllm::cli::ParseFlags(
      std::vector<std::string>(argv + 1, argv + argc), {},
      [&](const dllm::cli::ParsedArgs& parsed) {
        help = parsed.help;
        if (!parsed.positional.empty()) {
          return absl::InvalidArgumentError("unexpected argument '" + parsed.positional[0] + "'");
        }
        o.model_dir = absl::GetFlag(FLAGS_model);
        o.requests_path = absl::GetFlag(FLAGS_requests);
        o.out_path = absl::GetFlag(FLAGS_out);
        o.profile_path = absl::GetFlag(FLAGS_profile);
        o.steps_path = absl::GetFlag(FLAGS_steps_out);
        o.max_batch = absl::GetFlag(FLAGS_max_batch);
        o.queue_capacity = absl::GetFlag(FLAGS_queue_capacity);
        o.threads = absl::GetFlag(FLAGS_threads);
        o.kv_budget_bytes = absl::GetFlag(FLAGS_kv_budget_bytes);
        o.refuse_late_requests = absl::GetFlag(FLAGS_refuse_late_requests);
        o.tau_switch_slack_ratio = absl::GetFlag(FLAGS_tau_switch_slack_ratio);
        o.shadow_sample_rate = absl::GetFlag(FLAGS_shadow_sample_rate);
        o.mismatch_budget = absl::GetFlag(FLAGS_mismatch_budget);
        if (help) return absl::OkStatus();
        for (const auto& [flag, value] :
             {std::pair<const char*, const std::string*>{"--model", &o.model_dir},
              {"--requests", &o.requests_path},
              {"--out", &o.out_path}}) {
          if (value->empty()) return absl::InvalidArgumentError(std::string(flag) + " is required");
        }
        if (o.max_batch < 1) return absl::InvalidArgumentError("--max-batch must be >= 1");
        if (o.queue_capacity < 1) {
          return absl::InvalidArgumentError("--queue-capacity must be >= 1");
        }
        if (o.threads < 0) return absl::InvalidArgumentError("--threads must be >= 0");
        return absl::OkStatus();
      });
  if (help) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  if (!st.ok()) {
    std::fprintf(stderr, "dllm-serve-sim: %s\n%s", std::string(st.message()).c_str(), kUsage);
    return 2;
  }
  return Main(o);
}

}  // namespace
}  // namespace dllm::bench

int main(int argc, char** argv) {
  // An allocation or a thread that fails says so and exits 1 rather than aborting.
  try {
    return dllm::bench::Run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dllm-serve-sim: %s\n", e.what());
  } catch (...) {
    std::fprintf(stderr, "dllm-serve-sim: unknown exception\n");
  }
  return 1;
}
