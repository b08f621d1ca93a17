// dllm-forward-bench: speed of the forward pass on the CPU backend.
//
// Builds random models with real architectural shapes in memory (no files), times full steps
// (every position recomputed and predicted) and partial steps (EntropyCache-style: a few dozen
// query rows over the whole cached sequence) at several sequence lengths, and reports the
// achieved GFLOP/s next to the raw OpenBLAS sgemm rate measured in the same run.
//
// FLOPs counted per computed row and layer: 2 x (q, k, v, o, gate, up, down weight elements)
// + 4 x kv_positions x heads x head_dim (scores and weighted values); plus 2 x hidden x vocab
// per predicted row for the LM head. Norms, RoPE and softmax are not counted.
//
// The engine's own GEMM (cpu_gemm.h) is measured next to OpenBLAS's sgemm on the same shapes:
// OpenBLAS is only the comparison here (the engine links no BLAS). The line "openblas core"
// names the kernels OpenBLAS chose for this CPU: Debian's 0.3.21 falls back to its SSE3
// "Prescott" kernels on CPUs it does not know; OPENBLAS_CORETYPE=SkylakeX (AVX-512) or
// Haswell (AVX2) forces the right ones for a fair comparison.
//
// The partial step is also timed with attention maps (the head-averaged probabilities that
// d2Cache and Elastic-Cache decide from, fused into the attention pass): the "partial+maps"
// row, and the maps' share of that step's wall time, the decision cost those policies are
// charged with. `--model llada8b` (opt-in: ~2 GB of weights) runs two layers of
// LLaDA-8B-Instruct's shape (hidden 4096, 32 heads of 128, FFN 12288, vocabulary 126464): the
// share at 8B's shape, where attention is a smaller part of a layer than in the small models;
// "per layer" divides the maps' time by the layers' FLOP-proportional share of the step (the
// limit of a 32-layer step, whose LM head weighs less).
//
// Usage: dllm-forward-bench [--threads N] [--quick] [--model tiny|mid|llada8b] [--length N]
//                           [--partial-rows N] [--f32]
#include <cblas.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "bench/bench_clock.h"
#include "cli/flags.h"
#include "engine/backend/backend_factory.h"
#include "engine/backend/cpu/cpu_gemm.h"
#include "engine/backend/cpu/thread_pool.h"
#include "engine/kv/kv_pool.h"
#include "engine/model/forward_random_model.h"
#include "engine/model/step_flops.h"
#include "engine/model/transformer.h"

namespace dllm {
namespace {

using bench::Clock;
using bench::ProcessCpuSeconds;
using bench::Seconds;

struct Timing {
  double wall_s = 0;  // per run
  double cpu_s = 0;   // per run, summed over threads: shows contention on a shared machine
};

// Runs fn at least min_reps times and for at least min_seconds.
template <typename Fn>
Timing TimeIt(Fn fn, int min_reps, double min_seconds) {
  fn();  // warm-up
  int reps = 0;
  const auto start = Clock::now();
  const double cpu_start = ProcessCpuSeconds();
  do {
    fn();
    ++reps;
  } while (reps < min_reps || Seconds(start) < min_seconds);
  return {Seconds(start) / reps, (ProcessCpuSeconds() - cpu_start) / reps};
}

// Rates of a plain sgemm y[m, n] = x[m, k] · w[n, k]ᵀ: GFLOP per wall second and per CPU
// second (all threads).
struct Rate {
  double wall_gflops = 0;
  double cpu_gflops = 0;
};

Rate SgemmRate(int m, int n, int k) {
  std::vector<float> x(static_cast<size_t>(m) * k, 0.01f), w(static_cast<size_t>(n) * k, 0.02f),
      y(static_cast<size_t>(m) * n);
  const Timing t = TimeIt(
      [&] {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, k, 1.0f, x.data(), k, w.data(),
                    k, 0.0f, y.data(), n);
      },
      3, 0.3);
  const double gflop = 2.0 * m * n * k / 1e9;
  return {gflop / t.wall_s, gflop / t.cpu_s};
}

// A cache-line-aligned array, like the backend's weight buffers (CpuBuffer): a vector's
// 16-byte alignment would make half of the kernel's 32-byte bf16 loads split across lines.
template <typename T>
std::unique_ptr<T[], decltype(&std::free)> AlignedArray(size_t count, T value) {
  const size_t bytes = (count * sizeof(T) + 63) / 64 * 64;
  std::unique_ptr<T[], decltype(&std::free)> p(static_cast<T*>(std::aligned_alloc(64, bytes)),
                                               &std::free);
  std::fill(p.get(), p.get() + count, value);
  return p;
}

// The same product through the engine's own GEMM, with fp32 or bf16 weights packed and
// 64-byte aligned as the backend holds them (UploadMatrix).
Rate OwnGemmRate(int m, int n, int k, GemmWeightType type, ThreadPool* pool) {
  std::vector<float> x(static_cast<size_t>(m) * k, 0.01f), y(static_cast<size_t>(m) * n);
  const auto w = AlignedArray<float>(static_cast<size_t>(n) * k, 0.02f);
  const auto w16 = AlignedArray<uint16_t>(static_cast<size_t>(n) * k, 0x3ca4);  // bf16 0.02
  const auto packed =
      AlignedArray<uint8_t>(static_cast<size_t>(PackedGemmWeightBytes(type, n, k)), 0);
  PackGemmWeight(type == GemmWeightType::kBF16 ? static_cast<const void*>(w16.get())
                                               : static_cast<const void*>(w.get()),
                 type, n, k, packed.get());
  std::vector<float> scratch;
  const GemmWeight gw{packed.get(), type, n, k};
  const Timing t =
      TimeIt([&] { CpuGemm(x.data(), m, gw, nullptr, false, y.data(), pool, &scratch); }, 3, 0.3);
  const double gflop = 2.0 * m * n * k / 1e9;
  return {gflop / t.wall_s, gflop / t.cpu_s};
}

struct NamedConfig {
  const char* name;
  ModelConfig config;
  bool opt_in = false;  // runs only when --model names it
};

// The command line.
struct Options {
  int threads = 0;         // 0: all cores
  bool quick = false;      // fewer and shorter runs
  std::string only_model;  // a prefix of one model's name; empty: all
  int only_length = 0;     // 0: the default lengths
  int partial_rows = 24;   // rows a partial step recomputes
  DType weight_dtype = DType::kBF16;
};

std::vector<NamedConfig> Models() {
  return {
      {"tiny h256 L4 4x64 kv2 f768 v8k",
       RandomModelConfig(ModelFamily::kDream, 256, 4, 4, 2, 768, 8192, 4096)},
      {"mid h1024 L8 16x64 kv4 f2816 v32k",
       RandomModelConfig(ModelFamily::kLlada, 1024, 8, 16, 4, 2816, 32000, 4096)},
      {"llada8b h4096 L2 32x128 kv32 f12288 v126k",
       RandomModelConfig(ModelFamily::kLlada, 4096, 2, 32, 32, 12288, 126464, 4096), true},
  };
}

std::vector<int> Lengths(const Options& o) {
  if (o.only_length > 0) return {o.only_length};
  return o.quick ? std::vector<int>{128, 256} : std::vector<int>{128, 512, 1024};
}

// Prints OpenBLAS's sgemm and the engine's GEMM side by side on a few shapes and returns the
// reference rate of the %sgemm columns: the best large-M GEMM of either library.
Rate MeasureGemms(ThreadPool* pool) {
  struct Shape {
    int m, n, k;
  };
  const Shape shapes[] = {{512, 1024, 1024}, {512, 2816, 1024}, {24, 2816, 1024}};
  Rate best{0, 0};
  std::printf("%-26s %14s %14s %14s   (GFLOP/s wall)\n", "gemm M x N x K", "openblas", "own fp32",
              "own bf16");
  for (const Shape& sh : shapes) {
    const Rate blas = SgemmRate(sh.m, sh.n, sh.k);
    const Rate own32 = OwnGemmRate(sh.m, sh.n, sh.k, GemmWeightType::kF32, pool);
    const Rate own16 = OwnGemmRate(sh.m, sh.n, sh.k, GemmWeightType::kBF16, pool);
    std::printf("%5d x %5d x %5d        %14.1f %14.1f %14.1f\n", sh.m, sh.n, sh.k, blas.wall_gflops,
                own32.wall_gflops, own16.wall_gflops);
    if (sh.m < 512) continue;
    for (const Rate& r : {blas, own32, own16}) {
      best.wall_gflops = std::max(best.wall_gflops, r.wall_gflops);
      best.cpu_gflops = std::max(best.cpu_gflops, r.cpu_gflops);
    }
  }
  return best;
}

// A full step of an n-token sequence (every position recomputed and predicted) and a partial
// one (the window's masks plus the k most recent tokens: the last `rows` positions over the
// whole cached sequence, predicting the last `pred`). The batches point into `tokens`, so
// the pair is filled in place (FillSteps) and never copied.
struct StepPair {
  StepPair() = default;
  StepPair(const StepPair&) = delete;
  StepPair& operator=(const StepPair&) = delete;

  std::vector<int32_t> tokens;
  StepBatch full, partial;
  int n = 0, rows = 0, pred = 0;
};

void FillSteps(KvSlab* kv, int n, int vocab, const Options& o, StepPair* s) {
  s->n = n;
  s->tokens.resize(n);
  for (int i = 0; i < n; ++i) s->tokens[i] = (i * 7919) % vocab;
  std::vector<int32_t> all(n);
  std::iota(all.begin(), all.end(), 0);
  s->full.sequences.emplace_back();
  s->full.sequences[0].kv = kv;
  s->full.sequences[0].tokens = s->tokens;
  s->full.sequences[0].query_positions = all;
  s->full.sequences[0].predict_positions = all;
  s->rows = std::min(o.partial_rows, n);
  s->pred = std::min(std::max(1, o.partial_rows * 2 / 3), s->rows);
  s->partial = s->full;
  s->partial.sequences[0].query_positions.assign(all.end() - s->rows, all.end());
  s->partial.sequences[0].predict_positions.assign(all.end() - s->pred, all.end());
}

// One model's steps and the rate their %sgemm columns are shares of.
struct StepBench {
  const NamedConfig& model;
  Transformer& transformer;
  const Rate& sgemm;
  const Options& o;
};

// The partial step again with attention maps: its time, and the maps' share of it (what
// d2Cache and Elastic-Cache are charged as decision time), of the step and per layer.
bool TimeMapsShare(const StepBench& b, const StepPair& s, const Timing& plain) {
  StepBatch with_maps = s.partial;
  AttentionMaps maps;
  with_maps.sequences[0].attention_maps = &maps;
  StepResult result;
  bool ok = true;
  const Timing t = TimeIt([&] { ok &= b.transformer.Forward(with_maps, &result).ok(); }, 3, 0.3);
  if (!ok) return false;
  const ModelConfig& c = b.model.config;
  // maps.seconds is the last run's (each Forward resets the maps).
  const double layers_share = (StepFlops(c, s.rows, s.n, s.pred) - StepFlops(c, 0, 0, s.pred)) /
                              StepFlops(c, s.rows, s.n, s.pred);
  std::printf(
      "%-34s %5d %-7s %5d %5d %9.2f %9.2f   maps %.2f ms: %.2f%% of the step, %.2f%% per "
      "layer; step +%.1f%% over plain partial\n",
      "", s.n, "+maps", s.rows, s.pred, t.wall_s * 1e3, t.cpu_s * 1e3, maps.seconds * 1e3,
      100.0 * maps.seconds / t.wall_s, 100.0 * maps.seconds / (t.wall_s * layers_share),
      100.0 * (t.cpu_s / plain.cpu_s - 1.0));
  return true;
}

// Times both steps and prints a row for each; false when a forward failed.
bool TimeSteps(const StepBench& b, const StepPair& s) {
  StepResult result;
  bool ok = true;
  const Timing full_t = TimeIt([&] { ok &= b.transformer.Forward(s.full, &result).ok(); },
                               b.o.quick ? 1 : 2, b.o.quick ? 0.0 : 0.5);
  const Timing partial_t =
      TimeIt([&] { ok &= b.transformer.Forward(s.partial, &result).ok(); }, 3, 0.3);
  if (!ok) return false;
  // Dream-like models add at most one extra row for the shift; ignore it in the count.
  const ModelConfig& c = b.model.config;
  const double full_flops = StepFlops(c, s.n, s.n, s.n);
  const double partial_flops = StepFlops(c, s.rows, s.n, s.pred);
  for (int k = 0; k < 2; ++k) {
    const Timing& t = k == 0 ? full_t : partial_t;
    const double gflop = (k == 0 ? full_flops : partial_flops) / 1e9;
    std::printf("%-34s %5d %-7s %5d %5d %9.2f %9.2f %8.3f %9.1f %6.0f%% %9.1f %6.0f%%\n",
                b.model.name, s.n, k == 0 ? "full" : "partial", k == 0 ? s.n : s.rows,
                k == 0 ? s.n : s.pred, t.wall_s * 1e3, t.cpu_s * 1e3, gflop, gflop / t.wall_s,
                100.0 * gflop / t.wall_s / b.sgemm.wall_gflops, gflop / t.cpu_s,
                100.0 * gflop / t.cpu_s / b.sgemm.cpu_gflops);
  }
  std::printf("%-34s %5d partial/full wall speed-up x%.1f\n", "", s.n,
              full_t.wall_s / partial_t.wall_s);
  return TimeMapsShare(b, s, partial_t);
}

// Builds one random model onto the backend and times its steps at every length; the exit
// code (1 after printing the error).
int BenchModel(const NamedConfig& m, Backend* backend, const Rate& sgemm, const Options& o) {
  auto model = MakeRandomModel(m.config, 1, o.weight_dtype);
  auto transformer_or = Transformer::Create(m.config, model->weights, backend);
  if (!transformer_or.ok()) {
    std::fprintf(stderr, "%s\n", transformer_or.status().ToString().c_str());
    return 1;
  }
  std::unique_ptr<Transformer> transformer = std::move(*transformer_or);
  model.reset();  // weights now live on the backend
  KvPool pool(backend, m.config.kv_layout(), int64_t{4} << 30);
  for (int n : Lengths(o)) {
    auto slab = pool.Allocate(n);
    if (!slab.ok()) {
      std::fprintf(stderr, "%s\n", slab.status().ToString().c_str());
      return 1;
    }
    StepPair steps;
    FillSteps(slab->get(), n, m.config.vocab_size, o, &steps);
    if (!TimeSteps({m, *transformer, sgemm, o}, steps)) {
      std::fprintf(stderr, "forward failed\n");
      return 1;
    }
  }
  return 0;
}

int Run(const Options& o) {
  auto backend_or = CreateBackend("cpu", o.threads);
  if (!backend_or.ok()) {
    std::fprintf(stderr, "%s\n", backend_or.status().ToString().c_str());
    return 1;
  }
  std::unique_ptr<Backend> backend = std::move(*backend_or);
  const int pool_threads =
      o.threads > 0 ? o.threads : static_cast<int>(std::thread::hardware_concurrency());
  openblas_set_num_threads(pool_threads);
  ThreadPool gemm_pool(pool_threads);
  std::printf("dllm-forward-bench: cpu backend, %d threads, %s weights\n", pool_threads,
              o.weight_dtype == DType::kBF16 ? "bf16" : "fp32");
  std::printf("engine gemm target: %s; openblas core: %s (comparison only)\n",
              CpuGemmTargetName().c_str(), openblas_get_corename());
  const Rate sgemm = MeasureGemms(&gemm_pool);
  std::printf("%%sgemm columns below: share of the best M=512 rate above (%.1f GFLOP/s)\n",
              sgemm.wall_gflops);
  std::printf(
      "wall: elapsed time; cpu: CPU time of all threads (on a shared machine wall >> cpu/threads "
      "means contention)\n\n");
  std::printf("%-34s %5s %-7s %5s %5s %9s %9s %8s %9s %7s %9s %7s\n", "model", "L", "step", "rows",
              "pred", "wall_ms", "cpu_ms", "GFLOP", "GFLOP/s", "%sgemm", "GF/cpu-s", "%sgemm");
  for (const NamedConfig& m : Models()) {
    if (o.only_model.empty() ? m.opt_in : std::string(m.name).rfind(o.only_model, 0) != 0) {
      continue;
    }
    if (const int rc = BenchModel(m, backend.get(), sgemm, o); rc != 0) return rc;
  }
  return 0;
}

}  // namespace
}  // namespace dllm

ABSL_FLAG(int, threads, 0, "CPU threads (0: all cores)");
ABSL_FLAG(bool, quick, false, "fewer and shorter runs");
ABSL_FLAG(std::string, model, "", "only this model: tiny | mid | llada8b (opt-in)");
ABSL_FLAG(int, length, 0, "only this sequence length");
ABSL_FLAG(int, partial_rows, 24, "rows a partial step recomputes");
ABSL_FLAG(bool, f32, false, "f32 weights instead of bf16");

int main(int argc, char** argv) {
  constexpr const char* kUsage =
      "usage: %s [--threads N] [--quick] [--model tiny|mid|llada8b] [--length N] "
      "[--partial-rows N] "
      "[--f32]\n";
  dllm::Options o;
  bool help = false;
  const absl::Status st = dllm::cli::ParseFlags(
      std::vector<std::string>(argv + 1, argv + argc), {},
      [&](const dllm::cli::ParsedArgs& parsed) {
        help = parsed.help;
        if (!parsed.positional.empty()) {
          return absl::InvalidArgumentError("unexpected argument '" + parsed.positional[0] + "'");
        }
        o.threads = absl::GetFlag(FLAGS_threads);
        o.quick = absl::GetFlag(FLAGS_quick);
        o.only_model = absl::GetFlag(FLAGS_model);
        o.only_length = absl::GetFlag(FLAGS_length);
        o.partial_rows = std::max(1, absl::GetFlag(FLAGS_partial_rows));
        if (absl::GetFlag(FLAGS_f32)) o.weight_dtype = dllm::DType::kF32;
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
  return dllm::Run(o);
}
