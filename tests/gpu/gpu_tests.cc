// dllm_gpu_tests: the CUDA backend against the CPU backend, op by op and through the real
// Transformer. Without a CUDA device it prints "SKIPPED: no CUDA device" and exits 77
// (ctest's SKIP_RETURN_CODE for this test).
//
// Inputs are made bf16-representable on the host first, so both backends start from the same
// values; the CPU backend then computes in fp32 and the CUDA backend in bf16 with fp32
// accumulation. Tolerances (relative Frobenius error, argmax agreement) follow the issue:
// logits within 1e-2, greedy tokens identical on >= 99% of rows. Exact properties of the CUDA
// backend alone (batch invariance, a partial step reproducing a full step) are checked
// bit for bit.
//
// Usage: dllm_gpu_tests [--data_dir=tests/data] [--models_dir=models] [--ops_only]
#include <algorithm>
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
#include "engine/backend/backend.h"
#include "engine/backend/cpu/cpu_backend.h"
#include "engine/backend/cuda/cuda_backend.h"
#include "engine/core/attention_maps.h"
#include "engine/core/float16.h"
#include "engine/core/status_macros.h"
#include "engine/kv/kv_pool.h"
#include "engine/model/forward_inspection.h"
#include "engine/model/forward_random_model.h"
#include "engine/model/loaded_model.h"
#include "engine/model/transformer.h"
#include "nlohmann/json.hpp"
#include "tests/gpu/gpu_test_util.h"

namespace dllm {
namespace {

using gpu_test::RelErr;
using gpu_test::Report;

constexpr double kLogitsTolerance = 1e-2;
constexpr double kOpTolerance = 1e-2;
constexpr double kArgmaxAgreement = 0.99;

struct Backends {
  std::unique_ptr<Backend> cpu;
  std::unique_ptr<Backend> cuda;
};

std::vector<float> RandomBf16Values(int64_t n, float scale, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-scale, scale);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = RoundToBf16(dist(rng));
  return v;
}

absl::StatusOr<std::unique_ptr<DeviceBuffer>> Weights(Backend* b, const std::vector<float>& v) {
  return b->UploadWeights(DType::kF32,
                          std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(v.data()),
                                                   v.size() * sizeof(float)),
                          static_cast<int64_t>(v.size()));
}

// A Gemm weight [rows, cols] (UploadMatrix: the CPU backend packs it).
absl::StatusOr<std::unique_ptr<DeviceBuffer>> Matrix(Backend* b, const std::vector<float>& v,
                                                     int64_t rows, int64_t cols) {
  return b->UploadMatrix(DType::kF32,
                         std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(v.data()),
                                                  v.size() * sizeof(float)),
                         rows, cols);
}

absl::StatusOr<std::unique_ptr<DeviceBuffer>> Ints(Backend* b, const std::vector<int32_t>& v) {
  auto buf = b->Allocate(static_cast<int64_t>(std::max<size_t>(v.size(), 1)) * 4);
  if (!buf.ok()) return buf.status();
  absl::Status st = b->UploadInt32(v, buf->get());
  if (!st.ok()) return st;
  return buf;
}

// An activation buffer [rows, cols] holding `v` (gathered from a weight table).
absl::StatusOr<std::unique_ptr<DeviceBuffer>> Activation(Backend* b, const std::vector<float>& v,
                                                         int rows, int cols) {
  auto table = Weights(b, v);
  if (!table.ok()) return table.status();
  std::vector<int32_t> ids(static_cast<size_t>(rows));
  for (int r = 0; r < rows; ++r) ids[r] = r;
  auto idx = Ints(b, ids);
  if (!idx.ok()) return idx.status();
  auto out = b->Allocate(int64_t{rows} * cols * b->activation_bytes_per_element());
  if (!out.ok()) return out.status();
  absl::Status st = b->EmbeddingGather(**table, rows, cols, **idx, rows, out->get());
  if (!st.ok()) return st;
  return out;
}

absl::StatusOr<std::vector<float>> Download(Backend* b, const DeviceBuffer& buf, int64_t n,
                                            int64_t offset = 0) {
  std::vector<float> v(static_cast<size_t>(n));
  absl::Status st = b->DownloadFloats(buf, offset, std::span<float>(v));
  if (!st.ok()) return st;
  return v;
}

// Runs `body(backend)` on both backends; it returns the values to compare.
template <typename Body>
absl::Status CompareOp(Backends& be, Report* report, const std::string& name, double tolerance,
                       Body body) {
  DLLM_ASSIGN_OR_RETURN(cpu, body(be.cpu.get()));
  DLLM_ASSIGN_OR_RETURN(gpu, body(be.cuda.get()));
  const double err = RelErr(gpu, cpu);
  report->Check(err <= tolerance,
                absl::StrFormat("op %s: rel err %.3g (tol %.g)", name, err, tolerance));
  return absl::OkStatus();
}

// ---- Op-level tests --------------------------------------------------------------------

absl::Status OpTests(Backends& be, Report* report) {
  // Gemm with bias and accumulation.
  for (bool bias : {false, true}) {
    for (bool acc : {false, true}) {
      const int rows = 37, in = 256, out = 384;
      DLLM_RETURN_IF_ERROR(CompareOp(
          be, report, absl::StrCat("gemm bias=", bias, " acc=", acc), kOpTolerance,
          [&](Backend* b) -> absl::StatusOr<std::vector<float>> {
            DLLM_ASSIGN_OR_RETURN(
                x, Activation(b, RandomBf16Values(int64_t{rows} * in, 1.0f, 1), rows, in));
            DLLM_ASSIGN_OR_RETURN(
                w, Matrix(b, RandomBf16Values(int64_t{out} * in, 0.06f, 2), out, in));
            DLLM_ASSIGN_OR_RETURN(bb, Weights(b, RandomBf16Values(out, 0.5f, 3)));
            DLLM_ASSIGN_OR_RETURN(
                y, Activation(b, RandomBf16Values(int64_t{rows} * out, 1.0f, 4), rows, out));
            DLLM_RETURN_IF_ERROR(
                b->Gemm(*x, rows, in, *w, out, bias ? bb.get() : nullptr, acc, y.get()));
            return Download(b, *y, int64_t{rows} * out);
          }));
    }
  }
  // RMSNorm (vector and scalar paths), aliasing out = x.
  for (int cols : {4096, 50}) {
    const int rows = 5;
    DLLM_RETURN_IF_ERROR(CompareOp(
        be, report, absl::StrCat("rmsnorm cols=", cols), kOpTolerance,
        [&](Backend* b) -> absl::StatusOr<std::vector<float>> {
          DLLM_ASSIGN_OR_RETURN(
              x, Activation(b, RandomBf16Values(int64_t{rows} * cols, 2.0f, 5), rows, cols));
          DLLM_ASSIGN_OR_RETURN(w, Weights(b, RandomBf16Values(cols, 1.5f, 6)));
          DLLM_RETURN_IF_ERROR(b->RmsNorm(*x, rows, cols, *w, 1e-6f, x.get()));
          return Download(b, *x, int64_t{rows} * cols);
        }));
  }
  // RoPE, both modes, large positions.
  for (RopeMode mode : {RopeMode::kFp32, RopeMode::kBf16Rounded}) {
    const int rows = 9, heads = 4, hd = 128;
    DLLM_RETURN_IF_ERROR(
        CompareOp(be, report, absl::StrCat("rope mode=", mode == RopeMode::kFp32 ? "fp32" : "bf16"),
                  kOpTolerance, [&](Backend* b) -> absl::StatusOr<std::vector<float>> {
                    DLLM_ASSIGN_OR_RETURN(
                        x, Activation(b, RandomBf16Values(int64_t{rows} * heads * hd, 1.0f, 7),
                                      rows, heads * hd));
                    DLLM_ASSIGN_OR_RETURN(pos, Ints(b, {0, 1, 2, 17, 100, 511, 1024, 2047, 4000}));
                    DLLM_RETURN_IF_ERROR(b->Rope(x.get(), rows, heads, hd, *pos, 1000000.0f, mode));
                    return Download(b, *x, int64_t{rows} * heads * hd);
                  }));
  }
  // SwiGLU (out aliases gate), Add, GatherRows; odd sizes exercise the scalar tails.
  {
    const int64_t n = 1003;
    DLLM_RETURN_IF_ERROR(CompareOp(
        be, report, "swiglu", kOpTolerance, [&](Backend* b) -> absl::StatusOr<std::vector<float>> {
          DLLM_ASSIGN_OR_RETURN(g, Activation(b, RandomBf16Values(n, 6.0f, 8), 1, n));
          DLLM_ASSIGN_OR_RETURN(u, Activation(b, RandomBf16Values(n, 2.0f, 9), 1, n));
          DLLM_RETURN_IF_ERROR(b->SwiGlu(*g, *u, n, g.get()));
          return Download(b, *g, n);
        }));
    DLLM_RETURN_IF_ERROR(CompareOp(
        be, report, "add", kOpTolerance, [&](Backend* b) -> absl::StatusOr<std::vector<float>> {
          DLLM_ASSIGN_OR_RETURN(x, Activation(b, RandomBf16Values(n, 1.0f, 10), 1, n));
          DLLM_ASSIGN_OR_RETURN(y, Activation(b, RandomBf16Values(n, 1.0f, 11), 1, n));
          DLLM_RETURN_IF_ERROR(b->Add(*x, n, y.get()));
          return Download(b, *y, n);
        }));
    DLLM_RETURN_IF_ERROR(CompareOp(
        be, report, "gather_rows", 0.0, [&](Backend* b) -> absl::StatusOr<std::vector<float>> {
          const int rows = 6, cols = 40;
          DLLM_ASSIGN_OR_RETURN(
              x, Activation(b, RandomBf16Values(int64_t{rows} * cols, 1.0f, 12), rows, cols));
          DLLM_ASSIGN_OR_RETURN(idx, Ints(b, {5, 0, 3, 3, 1}));
          DLLM_ASSIGN_OR_RETURN(d,
                                b->Allocate(int64_t{5} * cols * b->activation_bytes_per_element()));
          DLLM_RETURN_IF_ERROR(b->GatherRows(*x, cols, *idx, 5, d.get()));
          return Download(b, *d, int64_t{5} * cols);
        }));
  }
  return absl::OkStatus();
}

// KV scatter + attention: two sequences with multi-tile and partial-tile key ranges, a full
// scatter followed by a partial step (a subset of rows rewritten and attending over all).
struct AttentionGeometry {
  int heads, kv_heads, head_dim;
};

// The shapes the attention tests cover: grouped and plain heads, head_dim 128/64/16.
constexpr AttentionGeometry kAttentionGeometries[] = {{8, 2, 128}, {4, 4, 64}, {4, 2, 16}};

AttentionShape MakeAttentionShape(const AttentionGeometry& g, int layers, int layer) {
  AttentionShape shape;
  shape.num_heads = g.heads;
  shape.num_kv_heads = g.kv_heads;
  shape.head_dim = g.head_dim;
  shape.num_layers = layers;
  shape.layer = layer;
  shape.scale = 1.0f / std::sqrt(static_cast<float>(g.head_dim));
  return shape;
}

absl::Status AttentionTests(Backends& be, Report* report) {
  for (const AttentionGeometry& g : kAttentionGeometries) {
    const int layers = 2, layer = 1;
    const int cap_a = 300, cap_b = 100, kv_b = 77;
    const int qw = g.heads * g.head_dim, kvw = g.kv_heads * g.head_dim;
    const AttentionShape shape = MakeAttentionShape(g, layers, layer);
    const std::string name =
        absl::StrCat("attention h=", g.heads, " kv=", g.kv_heads, " d=", g.head_dim);
    DLLM_RETURN_IF_ERROR(
        CompareOp(be, report, name, 2e-2, [&](Backend* b) -> absl::StatusOr<std::vector<float>> {
          const int act = b->activation_bytes_per_element();
          DLLM_ASSIGN_OR_RETURN(
              slab_a, b->Allocate(int64_t{layers} * 2 * cap_a * kvw * b->kv_bytes_per_element()));
          DLLM_ASSIGN_OR_RETURN(
              slab_b, b->Allocate(int64_t{layers} * 2 * cap_b * kvw * b->kv_bytes_per_element()));
          // Full scatter: all positions of both sequences.
          const int full_rows = cap_a + kv_b;
          std::vector<int32_t> pos_full;
          pos_full.reserve(full_rows);
          for (int p = 0; p < cap_a; ++p) pos_full.push_back(p);
          for (int p = 0; p < kv_b; ++p) pos_full.push_back(p);
          DLLM_ASSIGN_OR_RETURN(
              k1,
              Activation(b, RandomBf16Values(int64_t{full_rows} * kvw, 1.0f, 20), full_rows, kvw));
          DLLM_ASSIGN_OR_RETURN(
              v1,
              Activation(b, RandomBf16Values(int64_t{full_rows} * kvw, 1.0f, 21), full_rows, kvw));
          DLLM_ASSIGN_OR_RETURN(p1, Ints(b, pos_full));
          std::vector<AttentionSequence> seqs(2);
          seqs[0] = {slab_a.get(), cap_a, cap_a, 0, cap_a};
          seqs[1] = {slab_b.get(), cap_b, kv_b, cap_a, kv_b};
          DLLM_RETURN_IF_ERROR(b->KvScatter(*k1, *v1, *p1, seqs, shape));
          // Partial step: 70 rows of A (every 4th position, from 3), 5 rows of B.
          std::vector<int32_t> pos_part;
          for (int p = 3; p < cap_a && pos_part.size() < 70; p += 4) pos_part.push_back(p);
          const int rows_a = static_cast<int>(pos_part.size());
          for (int p : {0, 10, 40, 41, 76}) pos_part.push_back(p);
          const int rows = static_cast<int>(pos_part.size());
          DLLM_ASSIGN_OR_RETURN(
              k2, Activation(b, RandomBf16Values(int64_t{rows} * kvw, 1.0f, 22), rows, kvw));
          DLLM_ASSIGN_OR_RETURN(
              v2, Activation(b, RandomBf16Values(int64_t{rows} * kvw, 1.0f, 23), rows, kvw));
          DLLM_ASSIGN_OR_RETURN(
              q, Activation(b, RandomBf16Values(int64_t{rows} * qw, 2.0f, 24), rows, qw));
          DLLM_ASSIGN_OR_RETURN(p2, Ints(b, pos_part));
          seqs[0] = {slab_a.get(), cap_a, cap_a, 0, rows_a};
          seqs[1] = {slab_b.get(), cap_b, kv_b, rows_a, rows - rows_a};
          DLLM_RETURN_IF_ERROR(b->KvScatter(*k2, *v2, *p2, seqs, shape));
          DLLM_ASSIGN_OR_RETURN(out, b->Allocate(int64_t{rows} * qw * act));
          DLLM_RETURN_IF_ERROR(b->Attention(*q, seqs, shape, out.get()));
          DLLM_ASSIGN_OR_RETURN(result, Download(b, *out, int64_t{rows} * qw));
          // Also the slab of B (both layers: layer 0 must still be zero).
          DLLM_ASSIGN_OR_RETURN(slab, Download(b, *slab_b, int64_t{layers} * 2 * cap_b * kvw));
          result.insert(result.end(), slab.begin(), slab.end());
          return result;
        }));
  }
  return absl::OkStatus();
}

// Head-averaged attention probabilities (the d2cache and elastic policies' input): one
// sequence, a partial step's query rows over a multi-tile key range, CUDA vs CPU; and every
// CUDA row sums to 1. Then, on each backend, the fused path (Attention with
// AttentionSequence::probs, beside a sequence without) against the same backend's separate
// AttentionProbabilities: values within 1e-4 relative (the fused scores come from the
// attention pass's own q·k, whose sum order differs), the attention output bitwise the same
// as without probabilities, and the time charged.
absl::Status AttentionProbabilitiesTests(Backends& be, Report* report) {
  for (const AttentionGeometry& g : kAttentionGeometries) {
    const int layers = 2, layer = 1, cap = 300, kv_positions = 261, rows = 37;
    const int qw = g.heads * g.head_dim, kvw = g.kv_heads * g.head_dim;
    const AttentionShape shape = MakeAttentionShape(g, layers, layer);
    std::vector<float> probs[2];
    for (int which = 0; which < 2; ++which) {
      Backend* b = which == 0 ? be.cpu.get() : be.cuda.get();
      DLLM_ASSIGN_OR_RETURN(
          slab, b->Allocate(int64_t{layers} * 2 * cap * kvw * b->kv_bytes_per_element()));
      std::vector<int32_t> positions(static_cast<size_t>(kv_positions));
      for (int p = 0; p < kv_positions; ++p) positions[p] = p;
      DLLM_ASSIGN_OR_RETURN(
          k, Activation(b, RandomBf16Values(int64_t{kv_positions} * kvw, 1.0f, 40), kv_positions,
                        kvw));
      DLLM_ASSIGN_OR_RETURN(
          v, Activation(b, RandomBf16Values(int64_t{kv_positions} * kvw, 1.0f, 41), kv_positions,
                        kvw));
      DLLM_ASSIGN_OR_RETURN(pos, Ints(b, positions));
      const AttentionSequence all{slab.get(), cap, kv_positions, 0, kv_positions};
      DLLM_RETURN_IF_ERROR(b->KvScatter(*k, *v, *pos, std::span(&all, 1), shape));
      // The query rows start at row 5 of q, as a sequence after another in a batch would.
      DLLM_ASSIGN_OR_RETURN(
          q, Activation(b, RandomBf16Values(int64_t{rows + 5} * qw, 2.0f, 42), rows + 5, qw));
      const AttentionSequence seq{slab.get(), cap, kv_positions, 5, rows};
      probs[which].assign(static_cast<size_t>(rows) * kv_positions, -1.0f);
      DLLM_RETURN_IF_ERROR(b->AttentionProbabilities(*q, seq, shape, std::span(probs[which])));
      if (!b->fuses_attention_probabilities()) continue;
      std::vector<float> fused(probs[which].size(), -1.0f);
      AttentionProbsOut fused_out{std::span(fused)};
      AttentionSequence with = seq;
      with.probs = &fused_out;
      const AttentionSequence first{slab.get(), cap, kv_positions, 0, 5};
      const std::vector<AttentionSequence> plain_batch = {first, seq};
      const std::vector<AttentionSequence> fused_batch = {first, with};
      const int64_t out_values = int64_t{rows + 5} * qw;
      DLLM_ASSIGN_OR_RETURN(plain_o, b->Allocate(out_values * b->activation_bytes_per_element()));
      DLLM_ASSIGN_OR_RETURN(fused_o, b->Allocate(out_values * b->activation_bytes_per_element()));
      DLLM_RETURN_IF_ERROR(b->Attention(*q, plain_batch, shape, plain_o.get()));
      DLLM_RETURN_IF_ERROR(b->Attention(*q, fused_batch, shape, fused_o.get()));
      DLLM_ASSIGN_OR_RETURN(plain_values, Download(b, *plain_o, out_values));
      DLLM_ASSIGN_OR_RETURN(fused_values, Download(b, *fused_o, out_values));
      const double fused_err = RelErr(fused, probs[which]);
      report->Check(fused_err <= 1e-4 && plain_values == fused_values && fused_out.seconds > 0,
                    absl::StrFormat("op attention_probabilities_fused %s h=%d kv=%d d=%d: rel err "
                                    "%.3g vs the separate pass (tol 1e-4), attention output %s, "
                                    "%.3g s charged",
                                    b->name(), g.heads, g.kv_heads, g.head_dim, fused_err,
                                    plain_values == fused_values ? "unchanged" : "CHANGED",
                                    fused_out.seconds));
    }
    double worst_sum = 0;
    for (int r = 0; r < rows; ++r) {
      double sum = 0;
      for (int n = 0; n < kv_positions; ++n)
        sum += probs[1][static_cast<size_t>(r) * kv_positions + n];
      worst_sum = std::max(worst_sum, std::fabs(sum - 1.0));
    }
    const double err = RelErr(probs[1], probs[0]);
    report->Check(err <= 2e-2 && worst_sum <= 1e-3,
                  absl::StrFormat("op attention_probabilities h=%d kv=%d d=%d: rel err %.3g "
                                  "(tol 2e-2), worst |row sum - 1| %.3g (tol 1e-3)",
                                  g.heads, g.kv_heads, g.head_dim, err, worst_sum));
  }
  // ScatterRows (Elastic-Cache's hidden-state slabs): rows 2..4 of x into rows {7, 0, 3} of
  // a filled destination; bf16 moves are exact.
  DLLM_RETURN_IF_ERROR(CompareOp(
      be, report, "scatter_rows", 0.0, [&](Backend* b) -> absl::StatusOr<std::vector<float>> {
        const int cols = 40;
        DLLM_ASSIGN_OR_RETURN(
            x, Activation(b, RandomBf16Values(int64_t{6} * cols, 1.0f, 43), 6, cols));
        DLLM_ASSIGN_OR_RETURN(
            d, Activation(b, RandomBf16Values(int64_t{8} * cols, 1.0f, 44), 8, cols));
        DLLM_ASSIGN_OR_RETURN(idx, Ints(b, {7, 0, 3}));
        DLLM_RETURN_IF_ERROR(b->ScatterRows(*x, 2, cols, *idx, 3, d.get()));
        return Download(b, *d, int64_t{8} * cols);
      }));
  return absl::OkStatus();
}

absl::Status LogitsStatsTests(Backends& be, Report* report) {
  for (int vocab : {32000, 1001}) {
    const int rows = 48;
    std::vector<float> logits = RandomBf16Values(int64_t{rows} * vocab, 4.0f, 30);
    // A few rows with exact ties at the top and a one-hot-like row.
    for (int i = 0; i < 5; ++i)
      logits[static_cast<size_t>(vocab) + 100 + static_cast<size_t>(7) * i] = 9.0f;
    logits[2 * static_cast<size_t>(vocab) + 3] = 60.0f;
    std::vector<LogitsRowRequest> requests(rows);
    for (int r = 0; r < rows; ++r) {
      LogitsRowRequest& q = requests[r];
      q.position = 100 + r;
      q.step = r % 5;
      q.sampling.seed = 1000 + static_cast<uint64_t>(r / 8);
      switch (r % 6) {
        case 0:
          break;  // greedy
        case 1:
          q.sampling.temperature = 0.8f;
          break;
        case 2:
          q.sampling.temperature = 0.8f;
          q.sampling.top_k = 40;
          break;
        case 3:
          q.sampling.temperature = 1.0f;
          q.sampling.top_p = 0.9f;
          break;
        case 4:
          q.sampling.temperature = 1.2f;
          q.sampling.top_k = 50;
          q.sampling.top_p = 0.8f;
          break;
        case 5:
          q.sampling.temperature = 0.5f;
          q.sampling.top_k = 1;
          break;
      }
      // Logprob alternatives on a spread of rows, up to the bound (the rows of index 1 hold
      // the five-way tie at the top).
      q.sampling.top_logprobs = r % 4 == 1 ? kMaxTopLogprobs : r % 4 == 2 ? 3 : 0;
    }
    std::vector<RowStats> cpu(rows), gpu(rows);
    for (int which = 0; which < 2; ++which) {
      Backend* b = which == 0 ? be.cpu.get() : be.cuda.get();
      DLLM_ASSIGN_OR_RETURN(l, Activation(b, logits, rows, vocab));
      DLLM_RETURN_IF_ERROR(
          b->LogitsStats(*l, vocab, requests, std::span<RowStats>(which == 0 ? cpu : gpu)));
    }
    int argmax_same = 0, token_same = 0, top_same = 0;
    double worst = 0;
    for (int r = 0; r < rows; ++r) {
      argmax_same += cpu[r].argmax_token == gpu[r].argmax_token;
      token_same += cpu[r].token == gpu[r].token;
      worst =
          std::max({worst, std::fabs(static_cast<double>(cpu[r].argmax_prob) - gpu[r].argmax_prob),
                    std::fabs(static_cast<double>(cpu[r].entropy_nats) - gpu[r].entropy_nats) /
                        std::max(1.0, std::fabs(static_cast<double>(cpu[r].entropy_nats))),
                    std::fabs(static_cast<double>(cpu[r].margin) - gpu[r].margin),
                    std::fabs(static_cast<double>(cpu[r].token_prob) - gpu[r].token_prob),
                    std::fabs(static_cast<double>(cpu[r].token_logprob) - gpu[r].token_logprob)});
      if (cpu[r].position != gpu[r].position) worst = INFINITY;
      // The same top tokens in the same order (ties to the lower id on both), logprobs equal
      // up to the two backends' logf and sum order.
      top_same +=
          cpu[r].top_count == requests[r].sampling.top_logprobs &&
          gpu[r].top_count == cpu[r].top_count &&
          std::equal(cpu[r].top_tokens.begin(), cpu[r].top_tokens.begin() + cpu[r].top_count,
                     gpu[r].top_tokens.begin());
      for (int k = 0; k < std::min(cpu[r].top_count, gpu[r].top_count); ++k) {
        worst = std::max(
            worst, std::fabs(static_cast<double>(cpu[r].top_logprobs[k]) - gpu[r].top_logprobs[k]));
      }
    }
    report->Check(top_same == rows, absl::StrFormat("logits_stats vocab=%d: top tokens identical "
                                                    "%d/%d",
                                                    vocab, top_same, rows));
    report->Check(
        argmax_same == rows,
        absl::StrFormat("logits_stats vocab=%d: argmax identical %d/%d", vocab, argmax_same, rows));
    report->Check(token_same >= rows - 1,
                  absl::StrFormat("logits_stats vocab=%d: proposed token identical %d/%d", vocab,
                                  token_same, rows));
    report->Check(worst <= 1e-4,
                  absl::StrFormat("logits_stats vocab=%d: worst stat diff %.3g", vocab, worst));
  }
  return absl::OkStatus();
}

// ---- Transformer-level tests -------------------------------------------------------------

struct Model {
  std::unique_ptr<Transformer> transformer;
  std::unique_ptr<KvPool> pool;
};

absl::StatusOr<Model> MakeModel(const ModelConfig& config, const ModelWeights& weights,
                                Backend* backend) {
  Model m;
  DLLM_ASSIGN_OR_RETURN(t, Transformer::Create(config, weights, backend));
  m.transformer = std::move(t);
  m.pool = std::make_unique<KvPool>(backend, config.kv_layout(), int64_t{1} << 30);
  return m;
}

using Logits = std::vector<std::vector<std::vector<float>>>;

// One full step over `tokens`, logits of every hidden row (no shift).
absl::StatusOr<std::vector<float>> FullLogits(Model& m, const std::vector<int32_t>& tokens) {
  DLLM_ASSIGN_OR_RETURN(slab, m.pool->Allocate(static_cast<int>(tokens.size())));
  StepBatch batch;
  SequenceStep s;
  s.kv = slab.get();
  s.tokens = tokens;
  for (int p = 0; p < static_cast<int>(tokens.size()); ++p) {
    s.query_positions.push_back(p);
    s.predict_positions.push_back(p);
  }
  batch.sequences.push_back(std::move(s));
  StepResult result;
  Logits logits;
  DLLM_RETURN_IF_ERROR(
      ForwardWithLogits(*m.transformer, batch, DebugLogitsRows::kHiddenRows, &result, &logits));
  std::vector<float> flat;
  for (const auto& row : logits[0]) flat.insert(flat.end(), row.begin(), row.end());
  return flat;
}

struct Agreement {
  int rows = 0;
  int same = 0;
};

void CompareLogits(const std::string& name, const std::vector<float>& gpu,
                   const std::vector<float>& cpu, int vocab, Report* report, Agreement* agree) {
  const double err = RelErr(gpu, cpu);
  int same = 0, clear_rows = 0, clear_same = 0;
  const int rows = static_cast<int>(cpu.size() / vocab);
  for (int r = 0; r < rows; ++r) {
    const float* c = cpu.data() + int64_t{r} * vocab;
    const int cpu_top = gpu_test::ArgMax(c, vocab);
    const bool agree_row = gpu_test::ArgMax(gpu.data() + int64_t{r} * vocab, vocab) == cpu_top;
    same += agree_row;
    // A row is "clear" when the CPU's top-2 gap exceeds 1% of the top logit's size: a bf16
    // logit cannot flip such a row by rounding alone.
    float second = -INFINITY;
    for (int i = 0; i < vocab; ++i) {
      if (i != cpu_top) second = std::max(second, c[i]);
    }
    if (c[cpu_top] - second > 0.01f * std::max(1.0f, std::fabs(c[cpu_top]))) {
      ++clear_rows;
      clear_same += agree_row;
    }
  }
  if (agree != nullptr) {
    agree->rows += rows;
    agree->same += same;
  }
  report->Check(err <= kLogitsTolerance,
                absl::StrFormat("%s: logits rel err %.3g (tol %.g), argmax same %d/%d "
                                "(%d/%d on rows with a clear top-1)",
                                name, err, kLogitsTolerance, same, rows, clear_same, clear_rows));
}

std::vector<int32_t> RandomTokens(int n, int vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> dist(0, vocab - 1);
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (int32_t& x : t) x = dist(rng);
  return t;
}

// Random models are compared for logits error; their argmax agreement is reported but not
// part of the >= 99% criterion, which the issue sets for fixtures and trained models.
absl::Status RandomModelTests(Backends& be, Report* report) {
  struct Shape {
    ModelFamily family;
    int hidden, layers, heads, kv_heads, inter, vocab, rows;
  };
  // head_dim 128 (GQA, Dream rounding) and 64 (MHA, LLaDA): the tensor-core attention paths.
  for (const Shape& s : {Shape{ModelFamily::kDream, 1024, 2, 8, 2, 2048, 4096, 200},
                         Shape{ModelFamily::kLlada, 512, 2, 8, 8, 1024, 4096, 150}}) {
    const ModelConfig config = RandomModelConfig(s.family, s.hidden, s.layers, s.heads, s.kv_heads,
                                                 s.inter, s.vocab, 1024);
    std::unique_ptr<RandomModel> rm = MakeRandomModel(config, 77);
    // Both backends get the same bf16-representable weights, so the comparison measures the
    // kernels (bf16 activations vs fp32), not the weight rounding at upload.
    for (std::vector<float>& tensor : rm->storage) {
      for (float& x : tensor) x = RoundToBf16(x);
    }
    DLLM_ASSIGN_OR_RETURN(cpu, MakeModel(config, rm->weights, be.cpu.get()));
    DLLM_ASSIGN_OR_RETURN(gpu, MakeModel(config, rm->weights, be.cuda.get()));
    const std::vector<int32_t> tokens = RandomTokens(s.rows, s.vocab, 5);
    DLLM_ASSIGN_OR_RETURN(lc, FullLogits(cpu, tokens));
    DLLM_ASSIGN_OR_RETURN(lg, FullLogits(gpu, tokens));
    CompareLogits(
        absl::StrCat("random ", std::string(ModelFamilyName(s.family)), " d=", s.hidden / s.heads),
        lg, lc, s.vocab, report, nullptr);
  }
  return absl::OkStatus();
}

// Batch invariance and partial-step reproduction on the CUDA backend alone (bit for bit).
absl::Status CudaExactnessTests(Backends& be, Report* report) {
  const ModelConfig config =
      RandomModelConfig(ModelFamily::kDream, 1024, 2, 8, 2, 2048, 4096, 1024);
  std::unique_ptr<RandomModel> rm = MakeRandomModel(config, 78);
  DLLM_ASSIGN_OR_RETURN(m, MakeModel(config, rm->weights, be.cuda.get()));
  const std::vector<int32_t> ta = RandomTokens(150, config.vocab_size, 6);
  const std::vector<int32_t> tb = RandomTokens(333, config.vocab_size, 7);
  DLLM_ASSIGN_OR_RETURN(slab_a, m.pool->Allocate(150));
  DLLM_ASSIGN_OR_RETURN(slab_b, m.pool->Allocate(333));
  auto step = [](KvSlab* kv, const std::vector<int32_t>& tokens, std::vector<int32_t> query,
                 std::vector<int32_t> predict) {
    SequenceStep s;
    s.kv = kv;
    s.tokens = tokens;
    s.query_positions = std::move(query);
    s.predict_positions = std::move(predict);
    return s;
  };
  auto all = [](int n) {
    std::vector<int32_t> v(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) v[i] = i;
    return v;
  };
  const std::vector<int32_t> predict_a = {20, 21, 100, 149};
  // A alone.
  StepBatch alone;
  alone.sequences.push_back(step(slab_a.get(), ta, all(150), predict_a));
  StepResult r_alone;
  Logits l_alone;
  DLLM_RETURN_IF_ERROR(
      ForwardWithLogits(*m.transformer, alone, DebugLogitsRows::kHiddenRows, &r_alone, &l_alone));
  // A next to B (B first, so A's rows sit at other batch offsets).
  StepBatch both;
  both.sequences.push_back(step(slab_b.get(), tb, all(333), {5, 300}));
  both.sequences.push_back(step(slab_a.get(), ta, all(150), predict_a));
  StepResult r_both;
  Logits l_both;
  DLLM_RETURN_IF_ERROR(
      ForwardWithLogits(*m.transformer, both, DebugLogitsRows::kHiddenRows, &r_both, &l_both));
  report->Check(l_both[1] == l_alone[0],
                "cuda batch invariance: a sequence's logits do not depend on its batch mates");
  // Partial step on A: recompute a subset; the slab holds the full step's K/V for the rest,
  // which equal what the subset rows recompute, so the logits must match bit for bit.
  StepBatch partial;
  partial.sequences.push_back(step(slab_a.get(), ta, {20, 21, 60, 100, 149}, predict_a));
  StepResult r_part;
  Logits l_part;
  DLLM_RETURN_IF_ERROR(
      ForwardWithLogits(*m.transformer, partial, DebugLogitsRows::kHiddenRows, &r_part, &l_part));
  report->Check(l_part[0] == l_alone[0],
                "cuda partial step reproduces the full step's logits bit for bit");
  const auto* fallbacks = dynamic_cast<CudaBackend*>(be.cuda.get());
  if (fallbacks != nullptr) {
    std::printf("info: cuBLASLt batch-invariance fallbacks so far: %lld\n",
                static_cast<long long>(fallbacks->gemm_invariance_fallbacks()));
  }
  return absl::OkStatus();
}

// The forward's attention maps (d2cache, elastic) CUDA vs CPU on a random model, and on CUDA
// alone Elastic-Cache's restart from stored hidden states reproducing the full step bit for
// bit (ScatterRows/GatherRows of the hidden-state slab).
absl::Status CachePolicyForwardTests(Backends& be, Report* report) {
  const ModelConfig config = RandomModelConfig(ModelFamily::kDream, 512, 3, 8, 2, 1024, 4096, 512);
  std::unique_ptr<RandomModel> rm = MakeRandomModel(config, 79);
  for (std::vector<float>& tensor : rm->storage) {
    for (float& x : tensor) x = RoundToBf16(x);
  }
  DLLM_ASSIGN_OR_RETURN(mc, MakeModel(config, rm->weights, be.cpu.get()));
  DLLM_ASSIGN_OR_RETURN(mg, MakeModel(config, rm->weights, be.cuda.get()));
  const int n = 120;
  const std::vector<int32_t> tokens = RandomTokens(n, config.vocab_size, 9);
  const std::vector<int32_t> predict = {3, 50, 119};
  AttentionMaps maps[2];
  std::unique_ptr<KvSlab> gpu_slab;
  StepResult gpu_full;
  for (int which = 0; which < 2; ++which) {
    Model& m = which == 0 ? mc : mg;
    DLLM_ASSIGN_OR_RETURN(slab, m.pool->Allocate(n, /*hidden_states=*/true));
    SequenceStep s;
    s.kv = slab.get();
    s.tokens = tokens;
    for (int p = 0; p < n; ++p) s.query_positions.push_back(p);
    s.predict_positions = predict;
    s.attention_maps = &maps[which];
    s.store_hidden_states = true;
    StepResult r;
    DLLM_RETURN_IF_ERROR(m.transformer->Forward(StepBatch{{s}}, &r));
    if (which == 1) {
      gpu_slab = std::move(slab);
      gpu_full = std::move(r);
    }
  }
  report->Check(maps[1].layers == config.num_layers && maps[1].rows == n &&
                    maps[1].positions == n && maps[1].seconds > 0,
                absl::StrFormat("cuda attention maps: %d layers x %d rows x %d positions, %.3g s",
                                maps[1].layers, maps[1].rows, maps[1].positions, maps[1].seconds));
  const double err = RelErr(maps[1].probs, maps[0].probs);
  report->Check(err <= 3e-2,
                absl::StrFormat("attention maps of a full step: cuda vs cpu rel err %.3g "
                                "(tol 3e-2)",
                                err));
  // Restart at layer 1 and 2 from the stored hidden states: the same rows, the same logits.
  bool same = true;
  for (int first = 1; first < config.num_layers; ++first) {
    SequenceStep again;
    again.kv = gpu_slab.get();
    again.tokens = tokens;
    for (int p = 0; p < n; ++p) again.query_positions.push_back(p);
    again.predict_positions = predict;
    again.first_layer = first;
    StepResult r;
    DLLM_RETURN_IF_ERROR(mg.transformer->Forward(StepBatch{{again}}, &r));
    for (size_t j = 0; j < predict.size(); ++j) {
      same = same && r[0][j].argmax_token == gpu_full[0][j].argmax_token &&
             r[0][j].entropy_nats == gpu_full[0][j].entropy_nats &&
             r[0][j].argmax_prob == gpu_full[0][j].argmax_prob;
    }
  }
  report->Check(same,
                "cuda: a forward restarted at a later layer from stored hidden states "
                "reproduces the full step bit for bit");
  return absl::OkStatus();
}

absl::StatusOr<std::vector<float>> ReadF32(const std::string& path, size_t n) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  std::vector<float> v(n);
  f.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(n * sizeof(float)));
  if (!f) return absl::DataLossError(absl::StrCat(path, " is shorter than ", n, " floats"));
  return v;
}

// The reference fixtures (tests/data/reference/*): every golden case, CUDA vs CPU (gated)
// and vs the float64 golden logits (reported).
absl::Status FixtureTests(Backends& be, const std::string& data_dir, Report* report,
                          Agreement* agree) {
  namespace fs = std::filesystem;
  const fs::path root = fs::path(data_dir) / "reference";
  if (!fs::exists(root)) {
    report->Check(false, absl::StrCat("fixtures: ", root.string(), " not found"));
    return absl::OkStatus();
  }
  std::vector<fs::path> dirs;
  for (const auto& e : fs::directory_iterator(root)) {
    if (fs::exists(e.path() / "golden.json")) dirs.push_back(e.path());
  }
  std::sort(dirs.begin(), dirs.end());
  for (const fs::path& dir : dirs) {
    LoadOptions cpu_opts;
    cpu_opts.model_dir = dir.string();
    cpu_opts.backend = "cpu";
    cpu_opts.kv_budget_bytes = int64_t{64} << 20;
    LoadOptions gpu_opts = cpu_opts;
    gpu_opts.backend = "cuda";
    DLLM_ASSIGN_OR_RETURN(cpu, LoadModel(cpu_opts));
    DLLM_ASSIGN_OR_RETURN(gpu, LoadModel(gpu_opts));
    Model mc{std::move(cpu->transformer), std::move(cpu->kv_pool)};
    Model mg{std::move(gpu->transformer), std::move(gpu->kv_pool)};
    std::ifstream f(dir / "golden.json");
    const nlohmann::json golden = nlohmann::json::parse(f);
    int index = 0;
    for (const auto& c : golden["cases"]) {
      const std::vector<int32_t> tokens = c["input_ids"].get<std::vector<int32_t>>();
      const int vocab = c["vocab"].get<int>();
      DLLM_ASSIGN_OR_RETURN(lc, FullLogits(mc, tokens));
      DLLM_ASSIGN_OR_RETURN(lg, FullLogits(mg, tokens));
      const std::string name = absl::StrCat("fixture ", dir.filename().string(), " case ", index);
      CompareLogits(name, lg, lc, vocab, report, agree);
      auto ref = ReadF32((dir / c["logits_file"].get<std::string>()).string(), lc.size());
      if (ref.ok()) {
        std::printf("info: %s: vs float64 golden: cuda rel err %.3g, cpu rel err %.3g\n",
                    name.c_str(), RelErr(lg, *ref), RelErr(lc, *ref));
      }
      ++index;
    }
  }
  return absl::OkStatus();
}

// Trained tiny models (models/*-tiny), when present: random prompts, CUDA vs CPU.
absl::Status TinyModelTests(Backends& be, const std::string& models_dir, Report* report,
                            Agreement* agree) {
  namespace fs = std::filesystem;
  if (!fs::exists(models_dir)) {
    std::printf("info: %s not found; trained tiny models not tested\n", models_dir.c_str());
    return absl::OkStatus();
  }
  std::vector<fs::path> dirs;
  for (const auto& e : fs::directory_iterator(models_dir)) {
    const std::string name = e.path().filename().string();
    if (name.size() > 5 && name.substr(name.size() - 5) == "-tiny" &&
        fs::exists(e.path() / "config.json")) {
      dirs.push_back(e.path());
    }
  }
  std::sort(dirs.begin(), dirs.end());
  for (const fs::path& dir : dirs) {
    LoadOptions cpu_opts;
    cpu_opts.model_dir = dir.string();
    cpu_opts.backend = "cpu";
    cpu_opts.kv_budget_bytes = int64_t{256} << 20;
    LoadOptions gpu_opts = cpu_opts;
    gpu_opts.backend = "cuda";
    DLLM_ASSIGN_OR_RETURN(cpu, LoadModel(cpu_opts));
    DLLM_ASSIGN_OR_RETURN(gpu, LoadModel(gpu_opts));
    const int vocab = cpu->config.vocab_size;
    const int length = std::min(128, cpu->config.max_positions);
    Model mc{std::move(cpu->transformer), std::move(cpu->kv_pool)};
    Model mg{std::move(gpu->transformer), std::move(gpu->kv_pool)};
    for (uint32_t seed : {1u, 2u, 3u}) {
      const std::vector<int32_t> tokens = RandomTokens(length, vocab, seed);
      DLLM_ASSIGN_OR_RETURN(lc, FullLogits(mc, tokens));
      DLLM_ASSIGN_OR_RETURN(lg, FullLogits(mg, tokens));
      CompareLogits(absl::StrCat("model ", dir.filename().string(), " prompt ", seed), lg, lc,
                    vocab, report, agree);
    }
  }
  return absl::OkStatus();
}

std::string FlagValue(int argc, char** argv, const std::string& name, const std::string& dflt) {
  const std::string prefix = "--" + name + "=";
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], prefix.c_str(), prefix.size()) == 0) return argv[i] + prefix.size();
    if (std::string(argv[i]) == "--" + name) return "1";
  }
  return dflt;
}

int Main(int argc, char** argv) {
  if (CudaDeviceCount() <= 0) {
    std::printf("SKIPPED: no CUDA device\n");
    return 77;
  }
#ifdef DLLM_SOURCE_DIR
  const std::string source_dir = DLLM_SOURCE_DIR;
#else
  const std::string source_dir = ".";
#endif
  const std::string data_dir = FlagValue(argc, argv, "data_dir", source_dir + "/tests/data");
  const std::string models_dir = FlagValue(argc, argv, "models_dir", source_dir + "/models");
  Report report;
  Backends be;
  auto cpu = CreateCpuBackend(0);
  auto gpu = CreateCudaBackend();
  if (!cpu.ok() || !gpu.ok()) {
    std::printf("FAIL  backend creation: cpu %s, cuda %s\n", cpu.status().ToString().c_str(),
                gpu.status().ToString().c_str());
    return 1;
  }
  be.cpu = std::move(*cpu);
  be.cuda = std::move(*gpu);
  if (auto* c = dynamic_cast<CudaBackend*>(be.cuda.get())) {
    std::printf("device: %s\n", c->device_name().c_str());
  }
  Agreement agree;
  report.Status(OpTests(be, &report), "op tests ran");
  report.Status(AttentionTests(be, &report), "attention tests ran");
  report.Status(AttentionProbabilitiesTests(be, &report), "attention probabilities tests ran");
  report.Status(LogitsStatsTests(be, &report), "logits stats tests ran");
  if (FlagValue(argc, argv, "ops_only", "") == "1") {
    // Small kernel-level run (e.g. under compute-sanitizer).
    std::printf("%s: %d checks, %d failed\n", report.failures() == 0 ? "OK" : "FAILED",
                report.checks(), report.failures());
    return report.failures() == 0 ? 0 : 1;
  }
  report.Status(RandomModelTests(be, &report), "random model tests ran");
  report.Status(CudaExactnessTests(be, &report), "cuda exactness tests ran");
  report.Status(CachePolicyForwardTests(be, &report), "cache policy forward tests ran");
  report.Status(FixtureTests(be, data_dir, &report, &agree), "fixture tests ran");
  report.Status(TinyModelTests(be, models_dir, &report, &agree), "tiny model tests ran");
  const double agreement = agree.rows > 0 ? static_cast<double>(agree.same) / agree.rows : 1.0;
  report.Check(agreement >= kArgmaxAgreement,
               absl::StrFormat("greedy tokens identical on %d/%d rows (%.2f%%, need %.0f%%)",
                               agree.same, agree.rows, 100 * agreement, 100 * kArgmaxAgreement));
  std::printf("%s: %d checks, %d failed\n", report.failures() == 0 ? "OK" : "FAILED",
              report.checks(), report.failures());
  return report.failures() == 0 ? 0 : 1;
}

}  // namespace
}  // namespace dllm

int main(int argc, char** argv) { return dllm::Main(argc, argv); }
