// dllm_gpu_bench: throughput of the CUDA backend through the real Transformer on
// LLaDA-8B- and Dream-7B-shaped models with random bf16 weights (scripts/gpu-check).
//
// Ceilings measured in the same run: the cuBLASLt bf16 GEMM rate (8192^3) and the
// device-to-device copy bandwidth. Reported:
//   - full forward TFLOP/s at L = 512 and 1024 (batch 1, 32 predicted rows), and its
//     fraction of the GEMM ceiling;
//   - partial step time (96 query rows over a 1024-position slab, batch 1 and 16) against
//     the floor of weight bytes / copy bandwidth;
//   - end-to-end synthetic decode tokens/s, policy `none` (full forward every step) vs
//     `entropy` (partial steps over the window's masks plus the 64 most recently decoded
//     positions), batch 1 and 16, prompt 128 + 128 generated, window 32, two tokens committed
//     per step. With random weights every entropy is near ln V, so the entropy threshold
//     would always ask for a full step; the benchmark therefore fixes the decision to "full at
//     each window start, partial otherwise" and reports the full-step fraction. It measures
//     the cost of the two step kinds, not the policy's accuracy.
//
// Weights: the Transformer uploads from host tensors, so every tensor of the model is a view
// into one shared host buffer of random bf16 values (as large as the largest tensor; norm
// weights are ones), i.e. nothing is read from files and host memory stays ~1 GB.
//
// Usage: dllm_gpu_bench [--out=DIR] [--models=llada,dream] [--quick]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/backend/cuda/cuda_backend.h"
#include "engine/backend/cuda/cuda_microbench.h"
#include "engine/core/float16.h"
#include "engine/core/status_macros.h"
#include "engine/kv/kv_pool.h"
#include "engine/model/forward_random_model.h"
#include "engine/model/model_weights.h"
#include "engine/model/step_flops.h"
#include "engine/model/transformer.h"
#include "nlohmann/json.hpp"

namespace dllm {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// Host tensors for a model: every view aliases one random buffer (or the ones / bias buffer).
struct HostModel {
  std::vector<uint16_t> random;  // bf16 bits
  std::vector<uint16_t> ones;
  std::vector<uint16_t> bias;
  ModelWeights weights;
};

TensorView View(const std::string& name, std::vector<int64_t> shape,
                const std::vector<uint16_t>& data) {
  TensorView t;
  t.name = name;
  t.dtype = DType::kBF16;
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  t.shape = std::move(shape);
  t.bytes = std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(data.data()),
                                     static_cast<size_t>(n) * 2);
  return t;
}

std::unique_ptr<HostModel> MakeHostModel(const ModelConfig& c) {
  auto m = std::make_unique<HostModel>();
  const int64_t h = c.hidden_size, qw = int64_t{c.num_heads} * c.head_dim,
                kvw = int64_t{c.num_kv_heads} * c.head_dim, inter = c.intermediate_size,
                vocab = c.vocab_size;
  const int64_t largest = std::max({vocab * h, inter * h, qw * h});
  // A 16M-value random block tiled over the buffer: fast, and random enough for timing.
  const int64_t block = std::min<int64_t>(largest, int64_t{1} << 24);
  m->random.resize(static_cast<size_t>(largest));
  std::mt19937 rng(1234);
  std::uniform_real_distribution<float> dist(-0.03f, 0.03f);
  for (int64_t i = 0; i < block; ++i) m->random[i] = FloatToBf16(dist(rng));
  for (int64_t i = block; i < largest; i += block) {
    std::memcpy(m->random.data() + i, m->random.data(),
                static_cast<size_t>(std::min(block, largest - i)) * 2);
  }
  m->ones.assign(static_cast<size_t>(h), FloatToBf16(1.0f));
  m->bias.assign(static_cast<size_t>(std::max(qw, kvw)), FloatToBf16(0.01f));
  ModelWeights& w = m->weights;
  w.embed = View("embed", {vocab, h}, m->random);
  w.final_norm = View("final_norm", {h}, m->ones);
  w.lm_head = View("lm_head", {vocab, h}, m->random);
  for (int l = 0; l < c.num_layers; ++l) {
    LayerWeights lw;
    const std::string p = absl::StrCat("layer", l, ".");
    lw.attn_norm = View(p + "attn_norm", {h}, m->ones);
    lw.q = View(p + "q", {qw, h}, m->random);
    lw.k = View(p + "k", {kvw, h}, m->random);
    lw.v = View(p + "v", {kvw, h}, m->random);
    if (c.qkv_bias) {
      lw.q_bias = View(p + "q_bias", {qw}, m->bias);
      lw.k_bias = View(p + "k_bias", {kvw}, m->bias);
      lw.v_bias = View(p + "v_bias", {kvw}, m->bias);
    }
    lw.o = View(p + "o", {h, qw}, m->random);
    lw.ffn_norm = View(p + "ffn_norm", {h}, m->ones);
    lw.gate = View(p + "gate", {inter, h}, m->random);
    lw.up = View(p + "up", {inter, h}, m->random);
    lw.down = View(p + "down", {h, inter}, m->random);
    w.layers.push_back(std::move(lw));
  }
  return m;
}

struct Counts {
  double layer_params;  // matmul parameters of one layer
  double weight_bytes;  // bytes every step reads at least once (layers + LM head), bf16
};

Counts CountsOf(const ModelConfig& c) {
  const double h = c.hidden_size;
  Counts k;
  k.layer_params = LayerMatmulParams(c);
  k.weight_bytes = 2 * (c.num_layers * k.layer_params + double{1} * c.vocab_size * h);
  return k;
}

std::vector<int32_t> RandomTokens(int n, int vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> dist(0, vocab - 3);
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (int32_t& x : t) x = dist(rng);
  return t;
}

std::vector<int32_t> Range(int begin, int end) {
  std::vector<int32_t> v;
  for (int i = begin; i < end; ++i) v.push_back(i);
  return v;
}

struct Bench {
  Transformer* transformer;
  KvPool* pool;
  const ModelConfig* config;
};

// Median seconds of `iters` Forward calls (after `warmup`) over `batch` sequences of
// `length` positions, querying [q_begin, q_end) and predicting the last 32 queried positions.
// With `prefill`, a full step fills each slab first (untimed).
absl::StatusOr<double> TimeSteps(Bench& b, int batch, int length, int q_begin, int q_end,
                                 bool prefill, int warmup, int iters) {
  std::vector<std::unique_ptr<KvSlab>> slabs;
  std::vector<std::vector<int32_t>> tokens;
  for (int s = 0; s < batch; ++s) {
    DLLM_ASSIGN_OR_RETURN(slab, b.pool->Allocate(length));
    slabs.push_back(std::move(slab));
    tokens.push_back(RandomTokens(length, b.config->vocab_size, 100 + s));
  }
  auto make = [&](int qb, int qe) {
    StepBatch sb;
    for (int s = 0; s < batch; ++s) {
      SequenceStep st;
      st.kv = slabs[s].get();
      st.tokens = tokens[s];
      st.query_positions = Range(qb, qe);
      st.predict_positions = Range(std::max(qb, qe - 32), qe);
      sb.sequences.push_back(std::move(st));
    }
    return sb;
  };
  StepResult result;
  if (prefill) {
    const StepBatch full = make(0, length);
    DLLM_RETURN_IF_ERROR(b.transformer->Forward(full, &result));
  }
  const StepBatch sb = make(q_begin, q_end);
  std::vector<double> times;
  for (int i = 0; i < warmup + iters; ++i) {
    const auto t0 = Clock::now();
    DLLM_RETURN_IF_ERROR(b.transformer->Forward(sb, &result));
    const auto t1 = Clock::now();
    if (i >= warmup) times.push_back(Seconds(t0, t1));
  }
  return Median(times);
}

struct DecodeResult {
  double seconds = 0;
  int steps = 0;
  int full_steps = 0;
  double tokens_per_second = 0;
};

// Synthetic decode loop (see the file comment). `entropy`: partial steps between window
// starts.
absl::StatusOr<DecodeResult> Decode(Bench& b, int batch, bool entropy) {
  const int prompt = 128, gen = 128, window = 32, per_step = 2, recent_k = 64;
  const int n = prompt + gen;
  const int32_t mask = b.config->mask_token_id;
  std::vector<std::unique_ptr<KvSlab>> slabs;
  std::vector<std::vector<int32_t>> canvas;
  std::vector<std::vector<int>> decoded_at;  // step of decoding, -1 while masked
  for (int s = 0; s < batch; ++s) {
    DLLM_ASSIGN_OR_RETURN(slab, b.pool->Allocate(n));
    slabs.push_back(std::move(slab));
    std::vector<int32_t> t = RandomTokens(n, b.config->vocab_size, 500 + s);
    for (int p = prompt; p < n; ++p) t[p] = mask;
    canvas.push_back(std::move(t));
    decoded_at.emplace_back(n, -1);
  }
  DecodeResult out;
  const auto t0 = Clock::now();
  int window_start = prompt;
  bool need_full = true;
  for (int step = 0; window_start < n; ++step) {
    if (step > 4 * gen) return absl::InternalError("synthetic decode did not finish");
    const int window_end = std::min(n, window_start + window);
    StepBatch sb;
    for (int s = 0; s < batch; ++s) {
      SequenceStep st;
      st.kv = slabs[s].get();
      st.tokens = canvas[s];
      st.step = step;
      for (int p = window_start; p < window_end; ++p) {
        if (canvas[s][p] == mask) st.predict_positions.push_back(p);
      }
      if (!entropy || need_full) {
        st.query_positions = Range(0, n);
      } else {
        std::vector<int> order;
        for (int p = prompt; p < n; ++p) {
          if (decoded_at[s][p] >= 0) order.push_back(p);
        }
        std::sort(order.begin(), order.end(), [&](int a, int c) {
          return decoded_at[s][a] != decoded_at[s][c] ? decoded_at[s][a] > decoded_at[s][c] : a < c;
        });
        if (static_cast<int>(order.size()) > recent_k) order.resize(recent_k);
        for (int32_t p : st.predict_positions) order.push_back(p);
        std::sort(order.begin(), order.end());
        order.erase(std::unique(order.begin(), order.end()), order.end());
        st.query_positions.assign(order.begin(), order.end());
      }
      sb.sequences.push_back(std::move(st));
    }
    out.full_steps += (!entropy || need_full) ? 1 : 0;
    StepResult result;
    DLLM_RETURN_IF_ERROR(b.transformer->Forward(sb, &result));
    ++out.steps;
    // Commit the `per_step` most confident predictions of each sequence.
    for (int s = 0; s < batch; ++s) {
      std::vector<RowStats>& rows = result[s];
      std::sort(rows.begin(), rows.end(), [](const RowStats& a, const RowStats& c) {
        return a.argmax_prob != c.argmax_prob ? a.argmax_prob > c.argmax_prob
                                              : a.position < c.position;
      });
      for (int i = 0; i < std::min<int>(per_step, static_cast<int>(rows.size())); ++i) {
        // A random model may propose the mask id itself; commit a real token instead.
        const int32_t token = rows[i].token == mask ? 0 : rows[i].token;
        canvas[s][rows[i].position] = token;
        decoded_at[s][rows[i].position] = step;
      }
    }
    need_full = false;
    bool window_done = true;
    for (int s = 0; s < batch; ++s) {
      for (int p = window_start; p < window_end; ++p) window_done &= canvas[s][p] != mask;
    }
    if (window_done) {
      window_start = window_end;
      need_full = true;  // synthetic decision: a full refresh at every window start
    }
  }
  out.seconds = Seconds(t0, Clock::now());
  out.tokens_per_second = batch * gen / out.seconds;
  return out;
}

std::string FlagValue(int argc, char** argv, const std::string& name, const std::string& dflt) {
  const std::string prefix = "--" + name + "=";
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], prefix.c_str(), prefix.size()) == 0) return argv[i] + prefix.size();
    if (std::string(argv[i]) == "--" + name) return "1";
  }
  return dflt;
}

absl::Status BenchModel(const std::string& label, const ModelConfig& config, double gemm_tflops,
                        double copy_gbps, bool quick, nlohmann::json* out,
                        std::vector<std::string>* table) {
  std::printf("== %s: hidden %d, layers %d, heads %d/%d, ffn %d, vocab %d\n", label.c_str(),
              config.hidden_size, config.num_layers, config.num_heads, config.num_kv_heads,
              config.intermediate_size, config.vocab_size);
  std::fflush(stdout);
  CudaBackendOptions options;
  options.arena_reserve_bytes = int64_t{6} << 30;
  DLLM_ASSIGN_OR_RETURN(backend, CreateCudaBackendWithOptions(options));
  auto t0 = Clock::now();
  std::unique_ptr<HostModel> host = MakeHostModel(config);
  auto t1 = Clock::now();
  DLLM_ASSIGN_OR_RETURN(transformer, Transformer::Create(config, host->weights, backend.get()));
  auto t2 = Clock::now();
  host.reset();
  KvPool pool(backend.get(), config.kv_layout(), int64_t{40} << 30);
  Bench b{transformer.get(), &pool, &config};
  const Counts counts = CountsOf(config);
  nlohmann::json& j = *out;
  j["config"] = {{"hidden", config.hidden_size},
                 {"layers", config.num_layers},
                 {"heads", config.num_heads},
                 {"kv_heads", config.num_kv_heads},
                 {"intermediate", config.intermediate_size},
                 {"vocab", config.vocab_size}};
  j["weight_bytes"] = counts.weight_bytes;
  j["host_weights_s"] = Seconds(t0, t1);
  j["upload_s"] = Seconds(t1, t2);
  std::printf("weights: %.2f GB, host prep %.1f s, upload %.1f s\n", counts.weight_bytes / 1e9,
              Seconds(t0, t1), Seconds(t1, t2));

  const int iters = quick ? 2 : 5;
  for (int length : {512, 1024}) {
    DLLM_ASSIGN_OR_RETURN(sec, TimeSteps(b, 1, length, 0, length, false, 1, iters));
    const double flops = StepFlops(config, length, length, 32);
    const double tflops = flops / sec / 1e12;
    j["full_forward"][std::to_string(length)] = {
        {"seconds", sec}, {"tflops", tflops}, {"fraction_of_gemm", tflops / gemm_tflops}};
    table->push_back(absl::StrFormat("%-6s full L=%-4d   %8.2f ms  %7.1f TFLOP/s  %5.1f%% of GEMM",
                                     label, length, 1e3 * sec, tflops, 100 * tflops / gemm_tflops));
    std::printf("%s\n", table->back().c_str());
  }
  const double floor_s = counts.weight_bytes / (copy_gbps * 1e9);
  for (int batch : {1, 16}) {
    DLLM_ASSIGN_OR_RETURN(sec, TimeSteps(b, batch, 1024, 512, 608, true, 1, iters));
    j["partial_step"][std::to_string(batch)] = {{"seconds", sec},
                                                {"floor_seconds", floor_s},
                                                {"floor_fraction", floor_s / sec},
                                                {"query_rows", 96 * batch},
                                                {"kv_positions", 1024}};
    table->push_back(
        absl::StrFormat("%-6s partial b=%-3d  %8.2f ms  floor %.2f ms (%5.1f%% of floor speed)",
                        label, batch, 1e3 * sec, 1e3 * floor_s, 100 * floor_s / sec));
    std::printf("%s\n", table->back().c_str());
  }
  for (int batch : {1, 16}) {
    for (bool entropy : {false, true}) {
      DLLM_ASSIGN_OR_RETURN(d, Decode(b, batch, entropy));
      const char* policy = entropy ? "entropy" : "none";
      j["decode"][policy][std::to_string(batch)] = {{"seconds", d.seconds},
                                                    {"steps", d.steps},
                                                    {"full_steps", d.full_steps},
                                                    {"tokens_per_second", d.tokens_per_second}};
      table->push_back(absl::StrFormat("%-6s decode %-7s b=%-3d %8.1f tok/s (%d steps, %d full)",
                                       label, policy, batch, d.tokens_per_second, d.steps,
                                       d.full_steps));
      std::printf("%s\n", table->back().c_str());
    }
  }
  if (auto* c = dynamic_cast<CudaBackend*>(backend.get())) {
    j["gemm_invariance_fallbacks"] = c->gemm_invariance_fallbacks();
  }
  return absl::OkStatus();
}

int Main(int argc, char** argv) {
  if (CudaDeviceCount() <= 0) {
    std::printf("SKIPPED: no CUDA device\n");
    return 77;
  }
  const std::string out_dir = FlagValue(argc, argv, "out", "gpu-check-out");
  const std::string models = FlagValue(argc, argv, "models", "llada,dream");
  const bool quick = FlagValue(argc, argv, "quick", "") == "1";
  std::filesystem::create_directories(out_dir);
  nlohmann::json j;
  std::vector<std::string> table;
  int failures = 0;

  absl::StatusOr<double> gemm = MeasureBf16GemmTflops(8192, 8192, 8192, quick ? 5 : 20);
  absl::StatusOr<double> copy = MeasureDeviceCopyGBps(int64_t{2} << 30, quick ? 5 : 20);
  if (!gemm.ok() || !copy.ok()) {
    std::printf("FAIL ceilings: gemm %s, copy %s\n", gemm.status().ToString().c_str(),
                copy.status().ToString().c_str());
    return 1;
  }
  j["ceilings"] = {{"gemm_bf16_tflops_8192", *gemm}, {"d2d_copy_gbps", *copy}};
  table.push_back(absl::StrFormat("ceiling cuBLASLt bf16 GEMM 8192^3: %.1f TFLOP/s", *gemm));
  table.push_back(absl::StrFormat("ceiling device copy (read+write): %.1f GB/s", *copy));
  std::printf("%s\n%s\n", table[0].c_str(), table[1].c_str());

  struct Shape {
    std::string label;
    ModelConfig config;
  };
  std::vector<Shape> shapes;
  if (models.find("llada") != std::string::npos) {
    shapes.push_back(
        {"llada", RandomModelConfig(ModelFamily::kLlada, 4096, 32, 32, 32, 12288, 126464, 4096)});
  }
  if (models.find("dream") != std::string::npos) {
    shapes.push_back(
        {"dream", RandomModelConfig(ModelFamily::kDream, 3584, 28, 28, 4, 18944, 152064, 4096)});
  }
  for (const Shape& s : shapes) {
    nlohmann::json mj;
    absl::Status st = BenchModel(s.label, s.config, *gemm, *copy, quick, &mj, &table);
    if (!st.ok()) {
      std::printf("FAIL %s: %s\n", s.label.c_str(), st.ToString().c_str());
      mj["error"] = st.ToString();
      ++failures;
    }
    j["models"][s.label] = mj;
  }
  const std::string path = out_dir + "/gpu_bench.json";
  std::ofstream(path) << j.dump(2) << "\n";
  std::printf("\n---- gpu bench summary (%s) ----\n", path.c_str());
  for (const std::string& line : table) std::printf("%s\n", line.c_str());
  return failures == 0 ? 0 : 1;
}

}  // namespace
}  // namespace dllm

int main(int argc, char** argv) { return dllm::Main(argc, argv); }
