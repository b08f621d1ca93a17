// dllm-load-bench: loads a real-size checkpoint folder and times one full and one partial step.
//
// The check that an unmodified Hugging Face folder of a real model (8B: six shards, 16 GB of
// bf16) loads through the engine's normal path and runs on this machine's memory. Real weights
// cannot be downloaded here; bench/make_llada8b_shaped.py writes a LLaDA-8B-Instruct-shaped
// folder of random bf16 weights and bench/llada8b_shaped.sh drives the whole run.
//
// Load = LoadModelConfig + Checkpoint::Open (headers and index) + MapModelWeights +
// Transformer::Create (each tensor read with pread into one reused staging buffer and copied
// onto the backend: bf16 stays bf16 on the CPU backend), then the checkpoint is closed,
// exactly as LoadModel does. LoadModel itself is not used because it also needs the tokenizer
// files, which the shaped folder does not have (the real tokenizer.json is not available).
// Memory is read from /proc/self/status: VmRSS split into RssAnon (the weights' copy, the
// staging buffer, KV, workspace) and RssFile (file-backed pages: the binary and its libraries;
// checkpoints are no longer mapped), and VmHWM, the peak. Tensor bytes are read from disk
// during Create, so the load time includes reading 16 GB unless the folder is in the page
// cache.
//
// Steps, like dllm-forward-bench: a full step recomputes and predicts all L positions; a
// partial step then recomputes the last --partial-rows positions over the whole cached
// sequence and predicts 2/3 of them (EntropyCache-style). Each is run --repeats times (default
// once: a full 8B step at L = 512 takes minutes on one core); the first full step also fills
// the KV slab that the partial step reads. Prints a table and one JSON line.
//
// Usage: dllm-load-bench --model DIR [--length 512] [--partial-rows 24] [--threads N]
//                        [--repeats N] [--backend cpu|cuda]
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "bench/bench_clock.h"
#include "cli/flags.h"
#include "engine/backend/backend_factory.h"
#include "engine/kv/kv_pool.h"
#include "engine/model/checkpoint.h"
#include "engine/model/model_config.h"
#include "engine/model/model_weights.h"
#include "engine/model/step_flops.h"
#include "engine/model/transformer.h"

namespace dllm {
namespace {

using bench::Clock;
using bench::ProcessCpuSeconds;
using bench::Seconds;

// The memory lines of /proc/self/status, in bytes (-1 when absent).
struct Memory {
  int64_t rss = -1, hwm = -1, anon = -1, file = -1;
};

Memory ReadMemory() {
  Memory m;
  std::ifstream in("/proc/self/status");
  std::string key;
  int64_t kib = 0;
  std::string unit;
  while (in >> key) {
    int64_t* field = key == "VmRSS:"     ? &m.rss
                     : key == "VmHWM:"   ? &m.hwm
                     : key == "RssAnon:" ? &m.anon
                     : key == "RssFile:" ? &m.file
                                         : nullptr;
    if (field != nullptr && in >> kib >> unit) {
      *field = kib * 1024;
    } else {
      in.ignore(1 << 20, '\n');
    }
  }
  return m;
}

double Gb(int64_t bytes) { return bytes / 1e9; }

void PrintMemory(const char* when, const Memory& m) {
  std::printf("%-34s %9.2f %9.2f %9.2f %9.2f\n", when, Gb(m.rss), Gb(m.anon), Gb(m.file),
              Gb(m.hwm));
}

struct Timing {
  double wall_s = 0;  // per run
  double cpu_s = 0;   // per run, all threads
  bool ok = true;
};

template <typename Fn>
Timing TimeRuns(Fn fn, int repeats) {
  Timing t;
  const auto start = Clock::now();
  const double cpu_start = ProcessCpuSeconds();
  for (int i = 0; i < repeats; ++i) t.ok &= fn();
  t.wall_s = Seconds(start) / repeats;
  t.cpu_s = (ProcessCpuSeconds() - cpu_start) / repeats;
  return t;
}

// Random weights give meaningless tokens, but the statistics must be finite and in range.
bool ResultSane(const StepResult& result, const ModelConfig& c, size_t expected_rows) {
  if (result.size() != 1 || result[0].size() != expected_rows) return false;
  for (const RowStats& r : result[0]) {
    if (r.argmax_token < 0 || r.argmax_token >= c.vocab_size) return false;
    if (!std::isfinite(r.argmax_prob) || !std::isfinite(r.entropy_nats)) return false;
    if (r.argmax_prob <= 0 || r.argmax_prob > 1) return false;
  }
  return true;
}

int Fail(const std::string& what, const absl::Status& status) {
  std::fprintf(stderr, "dllm-load-bench: %s: %s\n", what.c_str(), status.ToString().c_str());
  return 1;
}

struct Options {
  std::string model_dir;
  std::string backend = "cpu";
  int length = 512;
  int partial_rows = 24;
  int threads = 0;
  int repeats = 1;
};

// The model as Run loads it (like LoadModel, the checkpoint closed again) and what loading
// cost. The transformer is declared after the backend it lives on, so it is destroyed first.
struct Loaded {
  ModelConfig config;
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Transformer> transformer;
  int tensors = 0;
  int64_t weight_bytes = 0;
  double open_s = 0;  // config, headers and index
  double load_s = 0;  // all of it
  Memory before, created, loaded;
};

// Loads o.model_dir into `m`; the exit code (1 after printing the error).
int Load(const Options& o, Loaded* m) {
  m->before = ReadMemory();
  const auto load_start = Clock::now();
  auto config = LoadModelConfig(o.model_dir);
  if (!config.ok()) return Fail("config", config.status());
  m->config = *config;
  auto checkpoint = Checkpoint::Open(o.model_dir);
  if (!checkpoint.ok()) return Fail("checkpoint", checkpoint.status());
  for (const std::string& name : (*checkpoint)->TensorNames()) {
    auto t = (*checkpoint)->Get(name);
    if (!t.ok()) return Fail("checkpoint", t.status());
    m->weight_bytes += t->SizeBytes();
    ++m->tensors;
  }
  auto weights = MapModelWeights(**checkpoint, m->config);
  if (!weights.ok()) return Fail("weights", weights.status());
  m->open_s = Seconds(load_start);

  auto backend = CreateBackend(o.backend, o.threads);
  if (!backend.ok()) return Fail("backend", backend.status());
  m->backend = std::move(*backend);
  auto transformer = Transformer::Create(m->config, *weights, m->backend.get());
  if (!transformer.ok()) return Fail("Transformer::Create", transformer.status());
  m->transformer = std::move(*transformer);
  m->created = ReadMemory();
  // LoadModel closes the checkpoint here; the weights now live on the backend.
  *weights = ModelWeights();
  checkpoint->reset();
  m->load_s = Seconds(load_start);
  m->loaded = ReadMemory();
  return 0;
}

// The two timed steps at length n, and the memory after them (KV and workspace in use).
struct Steps {
  int n = 0, rows = 0, pred = 0;
  Timing full, partial;
  Memory after;
};

// Runs the full steps, then the partial ones that read the KV they filled; the exit code.
int RunSteps(const Options& o, const Loaded& m, Steps* s) {
  const ModelConfig& c = m.config;
  const int n = s->n = std::min(o.length, c.max_positions);
  KvPool pool(m.backend.get(), c.kv_layout(),
              std::max<int64_t>(int64_t{1} << 20, c.KvBytesPerPosition(4) * n));
  auto slab = pool.Allocate(n);
  if (!slab.ok()) return Fail("kv slab", slab.status());

  std::vector<int32_t> tokens(n);
  for (int i = 0; i < n; ++i) tokens[i] = (i * 7919) % c.vocab_size;
  std::vector<int32_t> all(n);
  std::iota(all.begin(), all.end(), 0);
  StepBatch full;
  full.sequences.emplace_back();
  full.sequences[0].kv = slab->get();
  full.sequences[0].tokens = tokens;
  full.sequences[0].query_positions = all;
  full.sequences[0].predict_positions = all;
  const int rows = s->rows = std::min(o.partial_rows, n);
  const int pred = s->pred = std::min(std::max(1, o.partial_rows * 2 / 3), rows);
  StepBatch partial = full;
  partial.sequences[0].query_positions.assign(all.end() - rows, all.end());
  partial.sequences[0].predict_positions.assign(all.end() - pred, all.end());

  StepResult result;
  absl::Status step_status;
  auto step = [&](const StepBatch& batch, size_t predicted) {
    step_status = m.transformer->Forward(batch, &result);
    return step_status.ok() && ResultSane(result, c, predicted);
  };
  s->full = TimeRuns([&] { return step(full, n); }, o.repeats);
  if (!s->full.ok) return Fail("full step (or its statistics are not finite)", step_status);
  s->partial = TimeRuns([&] { return step(partial, pred); }, o.repeats);
  if (!s->partial.ok) return Fail("partial step (or its statistics are not finite)", step_status);
  s->after = ReadMemory();
  return 0;
}

void PrintTable(const Options& o, const Loaded& m, const Steps& s) {
  const ModelConfig& c = m.config;
  std::printf("dllm-load-bench: %s\n", o.model_dir.c_str());
  std::printf(
      "model: %s h%d L%d %dx%d kv%d f%d v%d; %d tensors, %.2f GB of weights; backend %s, "
      "threads %d\n",
      std::string(ModelFamilyName(c.family)).c_str(), c.hidden_size, c.num_layers, c.num_heads,
      c.head_dim, c.num_kv_heads, c.intermediate_size, c.vocab_size, m.tensors, Gb(m.weight_bytes),
      o.backend.c_str(), o.threads);
  std::printf("load: %.2f s (config + headers %.3f s; read and copy onto the backend %.2f s)\n\n",
              m.load_s, m.open_s, m.load_s - m.open_s);
  std::printf("%-34s %9s %9s %9s %9s   (GB, /proc/self/status)\n", "memory", "VmRSS", "RssAnon",
              "RssFile", "VmHWM");
  PrintMemory("before load", m.before);
  PrintMemory("after Create, checkpoint open", m.created);
  PrintMemory("after load (checkpoint closed)", m.loaded);
  PrintMemory("after the steps (+KV, workspace)", s.after);
  std::printf("RSS after load / weight bytes: %.3f\n\n",
              static_cast<double>(m.loaded.rss) / m.weight_bytes);

  const double full_gflop = StepFlops(c, s.n, s.n, s.n) / 1e9;
  const double partial_gflop = StepFlops(c, s.rows, s.n, s.pred) / 1e9;
  std::printf("%-8s %5s %5s %5s %10s %10s %9s %9s\n", "step", "L", "rows", "pred", "wall_s",
              "cpu_s", "GFLOP", "GFLOP/s");
  std::printf("%-8s %5d %5d %5d %10.2f %10.2f %9.1f %9.1f\n", "full", s.n, s.n, s.n, s.full.wall_s,
              s.full.cpu_s, full_gflop, full_gflop / s.full.wall_s);
  std::printf("%-8s %5d %5d %5d %10.2f %10.2f %9.1f %9.1f\n", "partial", s.n, s.rows, s.pred,
              s.partial.wall_s, s.partial.cpu_s, partial_gflop, partial_gflop / s.partial.wall_s);
  std::printf("partial/full wall speed-up x%.1f (repeats %d)\n", s.full.wall_s / s.partial.wall_s,
              o.repeats);
}

void PrintJson(const Options& o, const Loaded& m, const Steps& s) {
  std::printf(
      "{\"bench\":\"load\",\"model\":\"%s\",\"backend\":\"%s\",\"threads\":%d,\"tensors\":%d,"
      "\"weight_bytes\":%lld,\"load_s\":%.3f,\"open_s\":%.3f,\"rss_after_load\":%lld,"
      "\"rss_anon_after_load\":%lld,\"rss_file_after_load\":%lld,\"hwm_after_load\":%lld,"
      "\"rss_after_steps\":%lld,\"hwm_after_steps\":%lld,\"length\":%d,\"full_s\":%.3f,"
      "\"full_cpu_s\":%.3f,\"partial_rows\":%d,\"partial_predict\":%d,\"partial_s\":%.3f,"
      "\"partial_cpu_s\":%.3f,\"speedup\":%.2f,\"repeats\":%d}\n",
      o.model_dir.c_str(), o.backend.c_str(), o.threads, m.tensors,
      static_cast<long long>(m.weight_bytes), m.load_s, m.open_s,
      static_cast<long long>(m.loaded.rss), static_cast<long long>(m.loaded.anon),
      static_cast<long long>(m.loaded.file), static_cast<long long>(m.loaded.hwm),
      static_cast<long long>(s.after.rss), static_cast<long long>(s.after.hwm), s.n, s.full.wall_s,
      s.full.cpu_s, s.rows, s.pred, s.partial.wall_s, s.partial.cpu_s,
      s.full.wall_s / s.partial.wall_s, o.repeats);
}

int Run(const Options& o) {
  Loaded m;
  if (const int rc = Load(o, &m); rc != 0) return rc;
  Steps s;
  if (const int rc = RunSteps(o, m, &s); rc != 0) return rc;
  PrintTable(o, m, s);
  PrintJson(o, m, s);
  return 0;
}

}  // namespace
}  // namespace dllm

ABSL_FLAG(std::string, model, "", "checkpoint folder (required)");
ABSL_FLAG(std::string, backend, dllm::Options().backend, "cpu | cuda");
ABSL_FLAG(int, length, dllm::Options().length, "sequence length L");
ABSL_FLAG(int, partial_rows, dllm::Options().partial_rows, "rows a partial step recomputes");
ABSL_FLAG(int, threads, dllm::Options().threads, "CPU threads (0: the backend's default)");
ABSL_FLAG(int, repeats, dllm::Options().repeats, "runs of each step");

int main(int argc, char** argv) {
  constexpr const char* kUsage =
      "usage: %s --model DIR [--length 512] [--partial-rows 24] [--threads N] [--repeats N] "
      "[--backend cpu|cuda]\n";
  dllm::Options o;
  bool help = false;
  const absl::Status st = dllm::cli::ParseFlags(
      std::vector<std::string>(argv + 1, argv + argc), {},
      [&](const dllm::cli::ParsedArgs& parsed) {
        help = parsed.help;
        if (!parsed.positional.empty()) {
          return absl::InvalidArgumentError("unexpected argument '" + parsed.positional[0] + "'");
        }
        o.model_dir = absl::GetFlag(FLAGS_model);
        o.backend = absl::GetFlag(FLAGS_backend);
        o.length = std::max(1, absl::GetFlag(FLAGS_length));
        o.partial_rows = std::max(1, absl::GetFlag(FLAGS_partial_rows));
        o.threads = std::max(0, absl::GetFlag(FLAGS_threads));
        o.repeats = std::max(1, absl::GetFlag(FLAGS_repeats));
        return absl::OkStatus();
      });
  if (!st.ok()) {
    std::fprintf(stderr, "%s: %s\n", argv[0], std::string(st.message()).c_str());
    std::fprintf(stderr, kUsage, argv[0]);
    return 2;
  }
  if (help) {
    std::printf(kUsage, argv[0]);
    return 0;
  }
  if (o.model_dir.empty()) {
    std::fprintf(stderr, kUsage, argv[0]);
    return 2;
  }
  return dllm::Run(o);
}
