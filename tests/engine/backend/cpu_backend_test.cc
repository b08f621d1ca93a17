#include "engine/backend/cpu/cpu_backend.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "engine/backend/backend_factory.h"
#include "engine/backend/cpu/cpu_row_stats.h"

// The tests' shapes are small int constants whose products never overflow.
// NOLINTBEGIN(bugprone-implicit-widening-of-multiplication-result)
namespace dllm {
namespace {

std::unique_ptr<Backend> MakeCpu(int threads = 2) {
  auto b = CreateCpuBackend(threads);
  REQUIRE(b.ok());
  return std::move(*b);
}

std::unique_ptr<DeviceBuffer> UploadF32(Backend& b, const std::vector<float>& v) {
  auto buf = b.UploadWeights(
      DType::kF32,
      std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(v.data()), v.size() * 4),
      static_cast<int64_t>(v.size()));
  REQUIRE(buf.ok());
  return std::move(*buf);
}

// A Gemm weight [rows, cols], row-major in v.
std::unique_ptr<DeviceBuffer> UploadMatrixF32(Backend& b, const std::vector<float>& v, int64_t rows,
                                              int64_t cols) {
  auto buf = b.UploadMatrix(
      DType::kF32,
      std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(v.data()), v.size() * 4), rows,
      cols);
  REQUIRE(buf.ok());
  return std::move(*buf);
}

std::unique_ptr<DeviceBuffer> UploadI32(Backend& b, const std::vector<int32_t>& v) {
  auto buf = b.Allocate(static_cast<int64_t>(v.size()) * 4);
  REQUIRE(buf.ok());
  REQUIRE(b.UploadInt32(v, buf->get()).ok());
  return std::move(*buf);
}

std::vector<float> Download(Backend& b, const DeviceBuffer& buf, size_t n) {
  std::vector<float> out(n);
  REQUIRE(b.DownloadFloats(buf, 0, std::span<float>(out)).ok());
  return out;
}

std::vector<float> RandomVector(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = d(gen);
  return v;
}

// The attention weights of query row `r`, head `h` (kv group `g`) over `n` keys, in double:
// the independent reference for the attention kernels (scale 1/sqrt(8), head dim 8).
std::vector<double> NaiveSoftmax(const std::vector<float>& q, const std::vector<float>& k, int r,
                                 int h, int g, int heads, int kv_width, int d, int n) {
  std::vector<double> s(n);
  double m = -1e300;
  for (int p = 0; p < n; ++p) {
    double dot = 0;
    for (int i = 0; i < d; ++i) dot += q[(r * heads + h) * d + i] * k[p * kv_width + g * d + i];
    s[p] = dot / std::sqrt(8.0);
    m = std::max(m, s[p]);
  }
  double z = 0;
  for (double& x : s) z += (x = std::exp(x - m));
  for (double& x : s) x /= z;
  return s;
}

TEST_CASE("backend_factory: names and errors") {
  auto cpu = CreateBackend("cpu", 1);
  REQUIRE(cpu.ok());
  CHECK((*cpu)->name() == "cpu");
  auto bad = CreateBackend("tpu", 0);
  CHECK(bad.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(CreateBackend("cpu", -1).status().code() == absl::StatusCode::kInvalidArgument);
#ifndef DLLM_HAVE_CUDA
  CHECK(CreateBackend("cuda", 0).status().code() == absl::StatusCode::kUnimplemented);
#endif
}

TEST_CASE("cpu_backend: weight upload widens bf16 and f16 exactly") {
  auto b = MakeCpu();
  // bf16 1.5 = 0x3fc0; f16 -2.5 = 0xc100; f16 smallest subnormal 2^-24 = 0x0001.
  const uint8_t bf16[] = {0xc0, 0x3f, 0x80, 0xbf};  // 1.5, -1.0
  const uint8_t f16[] = {0x00, 0xc1, 0x01, 0x00};   // -2.5, 2^-24
  auto wb = b->UploadWeights(DType::kBF16, bf16, 2);
  auto wf = b->UploadWeights(DType::kF16, f16, 2);
  REQUIRE(wb.ok());
  REQUIRE(wf.ok());
  CHECK(Download(*b, **wb, 2) == std::vector<float>{1.5f, -1.0f});
  CHECK(Download(*b, **wf, 2) == std::vector<float>{-2.5f, std::ldexp(1.0f, -24)});
  CHECK(b->UploadWeights(DType::kF16, f16, 3).status().code() ==
        absl::StatusCode::kInvalidArgument);
}

TEST_CASE("cpu_backend: ops reject buffers that are too small") {
  auto b = MakeCpu();
  auto x = UploadF32(*b, std::vector<float>(8, 1.0f));
  auto w = UploadMatrixF32(*b, std::vector<float>(16, 1.0f), 4, 4);
  auto y = b->Allocate(4 * 4);
  REQUIRE(y.ok());
  // 2 rows x 4 in -> 2 x 4 out needs 8 floats of y; y has 4.
  CHECK(b->Gemm(*x, 2, 4, *w, 4, nullptr, false, y->get()).code() ==
        absl::StatusCode::kInvalidArgument);
  CHECK(b->Gemm(*x, 1, 4, *w, 4, nullptr, false, y->get()).ok());
  // Gemm takes only matrices uploaded as such, with the shape it is told.
  auto plain = UploadF32(*b, std::vector<float>(16, 1.0f));
  CHECK(b->Gemm(*x, 1, 4, *plain, 4, nullptr, false, y->get()).code() ==
        absl::StatusCode::kInvalidArgument);
  CHECK(b->Gemm(*x, 1, 2, *w, 8, nullptr, false, y->get()).code() ==
        absl::StatusCode::kInvalidArgument);
  auto ids = UploadI32(*b, {0, 5});
  CHECK(b->EmbeddingGather(*w, 4, 4, *ids, 2, x.get()).code() ==
        absl::StatusCode::kInvalidArgument);
}

TEST_CASE("cpu_backend: GEMM with bias and accumulate") {
  auto b = MakeCpu();
  const std::vector<float> xv = {1, 2, 3, 4, 5, 6};                     // [2, 3]
  const std::vector<float> wv = {1, 0, 0, 0, 1, 0, 1, 1, 1, 2, 0, -1};  // [4, 3]
  auto x = UploadF32(*b, xv);
  auto w = UploadMatrixF32(*b, wv, 4, 3);
  auto bias = UploadF32(*b, {0.5f, 0, 0, -1});
  auto y = UploadF32(*b, {1, 1, 1, 1, 1, 1, 1, 1});
  REQUIRE(b->Gemm(*x, 2, 3, *w, 4, bias.get(), true, y.get()).ok());
  CHECK(Download(*b, *y, 8) == std::vector<float>{2.5f, 3, 7, -1, 5.5f, 6, 16, 2});
}

TEST_CASE("cpu_backend: RoPE rotates pairs (j, j + d/2) by position * inv_freq") {
  auto b = MakeCpu();
  const int heads = 2, d = 8, rows = 3;
  const std::vector<float> xv = RandomVector(rows * heads * d, 5);
  auto x = UploadF32(*b, xv);
  auto pos = UploadI32(*b, {0, 5, 1000});
  REQUIRE(b->Rope(x.get(), rows, heads, d, *pos, 10000.0f, RopeMode::kFp32).ok());
  const std::vector<float> got = Download(*b, *x, xv.size());
  const int positions[] = {0, 5, 1000};
  for (int r = 0; r < rows; ++r) {
    for (int h = 0; h < heads; ++h) {
      for (int j = 0; j < d / 2; ++j) {
        const double inv = std::pow(10000.0, -2.0 * j / d);
        const double a = positions[r] * inv;
        const float* in = &xv[(r * heads + h) * d];
        const float* out = &got[(r * heads + h) * d];
        CHECK(out[j] == Approx(in[j] * std::cos(a) - in[j + d / 2] * std::sin(a)).margin(1e-4));
        CHECK(out[j + d / 2] ==
              Approx(in[j + d / 2] * std::cos(a) + in[j] * std::sin(a)).margin(1e-4));
      }
    }
  }
}

TEST_CASE("cpu_backend: GQA attention over a slab matches a naive softmax") {
  auto b = MakeCpu(3);
  const int heads = 4, kv_heads = 2, d = 8, layers = 2, capacity = 12, n = 10, layer = 1;
  const int kv_width = kv_heads * d;
  auto slab_or = b->Allocate(int64_t{layers} * 2 * capacity * kv_width * 4);
  REQUIRE(slab_or.ok());
  std::unique_ptr<DeviceBuffer> slab = std::move(*slab_or);
  // Write K/V for all n positions through KvScatter (scrambled order).
  const std::vector<float> kv_k = RandomVector(n * kv_width, 1),
                           kv_v = RandomVector(n * kv_width, 2);
  std::vector<int32_t> order = {3, 0, 9, 1, 2, 8, 4, 7, 5, 6};
  std::vector<float> k_rows, v_rows;
  for (int32_t p : order) {
    k_rows.insert(k_rows.end(), kv_k.begin() + p * kv_width, kv_k.begin() + (p + 1) * kv_width);
    v_rows.insert(v_rows.end(), kv_v.begin() + p * kv_width, kv_v.begin() + (p + 1) * kv_width);
  }
  auto k = UploadF32(*b, k_rows);
  auto v = UploadF32(*b, v_rows);
  auto pos = UploadI32(*b, order);
  AttentionShape shape{heads, kv_heads, d, layers, layer, 1.0f / std::sqrt(8.0f)};
  AttentionSequence seq{slab.get(), capacity, n, 0, n};
  REQUIRE(b->KvScatter(*k, *v, *pos, {&seq, 1}, shape).ok());

  const int q_rows = 3;
  const std::vector<float> qv = RandomVector(q_rows * heads * d, 9, 2.0f);
  auto q = UploadF32(*b, qv);
  auto out = b->Allocate(q_rows * heads * d * 4);
  REQUIRE(out.ok());
  AttentionSequence qs{slab.get(), capacity, n, 0, q_rows};
  REQUIRE(b->Attention(*q, {&qs, 1}, shape, out->get()).ok());
  const std::vector<float> got = Download(*b, **out, q_rows * heads * d);
  for (int r = 0; r < q_rows; ++r) {
    for (int h = 0; h < heads; ++h) {
      const int g = h / (heads / kv_heads);
      const std::vector<double> s = NaiveSoftmax(qv, kv_k, r, h, g, heads, kv_width, d, n);
      for (int i = 0; i < d; ++i) {
        double ref = 0;
        for (int p = 0; p < n; ++p) ref += s[p] * kv_v[p * kv_width + g * d + i];
        CHECK(got[(r * heads + h) * d + i] == Approx(ref).margin(1e-5));
      }
    }
  }
}

// A slab of shape.num_layers layers and `capacity` positions whose layer shape.layer holds
// K/V rows k and v ([n, kv_heads * head_dim]) at positions 0 .. n-1.
std::unique_ptr<DeviceBuffer> FilledSlab(Backend& b, const AttentionShape& shape, int capacity,
                                         const std::vector<float>& k, const std::vector<float>& v,
                                         int n) {
  const int64_t kv_width = int64_t{shape.num_kv_heads} * shape.head_dim;
  auto slab = b.Allocate(int64_t{shape.num_layers} * 2 * capacity * kv_width * 4);
  REQUIRE(slab.ok());
  std::vector<int32_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  auto kb = UploadF32(b, k);
  auto vb = UploadF32(b, v);
  auto pos = UploadI32(b, order);
  AttentionSequence all{slab->get(), capacity, n, 0, n};
  REQUIRE(b.KvScatter(*kb, *vb, *pos, {&all, 1}, shape).ok());
  return std::move(*slab);
}

TEST_CASE("cpu_backend: attention probabilities are the head mean of a naive softmax") {
  const int heads = 4, kv_heads = 2, d = 8, layers = 2, capacity = 80, n = 70, layer = 1;
  const int kv_width = kv_heads * d;
  // 70 query rows: three tasks of up to 32 rows, on 1 and 3 threads.
  const int q_rows = 70;
  const std::vector<float> kv_k = RandomVector(n * kv_width, 3),
                           kv_v = RandomVector(n * kv_width, 4);
  const std::vector<float> qv = RandomVector(q_rows * heads * d, 5, 2.0f);
  std::vector<std::vector<float>> results;
  for (int threads : {1, 3}) {
    auto b = MakeCpu(threads);
    CHECK(b->computes_attention_probabilities());
    AttentionShape shape{heads, kv_heads, d, layers, layer, 1.0f / std::sqrt(8.0f)};
    std::unique_ptr<DeviceBuffer> slab = FilledSlab(*b, shape, capacity, kv_k, kv_v, n);
    // Rows [5, 5 + q_rows) of a larger q buffer: the sequence's row_begin is honoured.
    std::vector<float> padded(5 * heads * d, 100.0f);
    padded.insert(padded.end(), qv.begin(), qv.end());
    auto q = UploadF32(*b, padded);
    AttentionSequence qs{slab.get(), capacity, n, 5, q_rows};
    std::vector<float> probs(static_cast<size_t>(q_rows) * n, -1.0f);
    REQUIRE(b->AttentionProbabilities(*q, qs, shape, probs).ok());
    std::vector<float> too_small(static_cast<size_t>(q_rows) * n - 1);
    CHECK(b->AttentionProbabilities(*q, qs, shape, too_small).code() ==
          absl::StatusCode::kInvalidArgument);
    for (int r = 0; r < q_rows; ++r) {
      std::vector<double> mean(n, 0.0);
      for (int h = 0; h < heads; ++h) {
        const std::vector<double> s =
            NaiveSoftmax(qv, kv_k, r, h, h / (heads / kv_heads), heads, kv_width, d, n);
        for (int p = 0; p < n; ++p) mean[p] += s[p] / heads;
      }
      for (int p = 0; p < n; ++p) {
        INFO("row " << r << " position " << p);
        CHECK(probs[r * n + p] == Approx(mean[p]).margin(1e-6));
      }
    }
    results.push_back(probs);
  }
  CHECK(results[0] == results[1]);  // the thread count changes no bit
}

TEST_CASE("cpu_backend: attention fused with its probabilities changes no bit of either") {
  // The fused pass (AttentionSequence::probs) must give AttentionProbabilities' values and the
  // plain pass's output, bit for bit, on any thread count; a second sequence in the same call
  // without probs is unaffected.
  const int heads = 4, kv_heads = 2, d = 8, layers = 2, capacity = 80, n = 70, layer = 1;
  const int kv_width = kv_heads * d, q_width = heads * d, q_rows = 70;
  const std::vector<float> kv_k = RandomVector(n * kv_width, 13),
                           kv_v = RandomVector(n * kv_width, 14);
  const std::vector<float> qv = RandomVector(2 * q_rows * q_width, 15, 2.0f);
  for (int threads : {1, 3}) {
    INFO(threads << " threads");
    auto b = MakeCpu(threads);
    REQUIRE(b->fuses_attention_probabilities());
    const AttentionShape shape{heads, kv_heads, d, layers, layer, 1.0f / std::sqrt(8.0f)};
    std::unique_ptr<DeviceBuffer> slab = FilledSlab(*b, shape, capacity, kv_k, kv_v, n);
    auto q = UploadF32(*b, qv);
    // Two sequences over the same slab: rows [0, 70) with probabilities, [70, 140) without.
    std::vector<AttentionSequence> seqs = {{slab.get(), capacity, n, 0, q_rows},
                                           {slab.get(), capacity, n - 5, q_rows, q_rows}};
    auto plain_or = b->Allocate(int64_t{2} * q_rows * q_width * 4);
    auto fused_or = b->Allocate(int64_t{2} * q_rows * q_width * 4);
    REQUIRE((plain_or.ok() && fused_or.ok()));
    REQUIRE(b->Attention(*q, seqs, shape, plain_or->get()).ok());
    std::vector<float> expected(static_cast<size_t>(q_rows) * n);
    REQUIRE(b->AttentionProbabilities(*q, seqs[0], shape, expected).ok());
    AttentionProbsOut out;
    std::vector<float> probs(expected.size(), -1.0f);
    out.values = probs;
    seqs[0].probs = &out;
    REQUIRE(b->Attention(*q, seqs, shape, fused_or->get()).ok());
    CHECK(probs == expected);
    CHECK(Download(*b, **fused_or, 2 * q_rows * q_width) ==
          Download(*b, **plain_or, 2 * q_rows * q_width));
    // A probs array of the wrong size is refused before anything runs.
    std::vector<float> short_probs(expected.size() - 1);
    out.values = short_probs;
    CHECK(b->Attention(*q, seqs, shape, fused_or->get()).code() ==
          absl::StatusCode::kInvalidArgument);
  }
}

LogitsRowRequest Request(int32_t position, int32_t step, float temperature, int top_k = 0,
                         float top_p = 1.0f, uint64_t seed = 1) {
  LogitsRowRequest r;
  r.position = position;
  r.step = step;
  r.sampling.temperature = temperature;
  r.sampling.top_k = top_k;
  r.sampling.top_p = top_p;
  r.sampling.seed = seed;
  return r;
}

TEST_CASE("cpu_backend: logits statistics against a double reference") {
  auto b = MakeCpu();
  const int vocab = 1000;
  std::vector<float> lv = RandomVector(2 * vocab, 4, 3.0f);
  lv[17] = 20.0f;           // row 0 argmax at 17 ...
  lv[400] = 20.0f;          // ... tied with 400: lowest id wins
  lv[vocab + 999] = 50.0f;  // row 1: near one-hot
  auto logits = UploadF32(*b, lv);
  std::vector<LogitsRowRequest> req = {Request(5, 0, 0.0f), Request(6, 0, 0.0f)};
  std::vector<RowStats> out(2);
  REQUIRE(b->LogitsStats(*logits, vocab, req, out).ok());
  for (int r = 0; r < 2; ++r) {
    const float* l = &lv[r * vocab];
    double m = -1e300, z = 0, h = 0;
    for (int i = 0; i < vocab; ++i) m = std::max(m, static_cast<double>(l[i]));
    for (int i = 0; i < vocab; ++i) z += std::exp(l[i] - m);
    for (int i = 0; i < vocab; ++i) {
      const double p = std::exp(l[i] - m) / z;
      if (p > 0) h -= p * std::log(p);
    }
    CHECK(out[r].entropy_nats == Approx(h).epsilon(1e-4).margin(1e-6));
    CHECK(out[r].argmax_prob == Approx(1.0 / z).epsilon(1e-5));
    CHECK(out[r].token == out[r].argmax_token);
    CHECK(out[r].token_prob == out[r].argmax_prob);
    CHECK(out[r].position == 5 + r);
  }
  CHECK(out[0].argmax_token == 17);
  CHECK(out[0].margin == Approx(0.0).margin(1e-7));  // tie: top1 == top2
  CHECK(out[1].argmax_token == 999);
  CHECK(out[1].margin > 0.99f);
}

TEST_CASE(
    "cpu_row_stats: sampling is deterministic per (seed, position, step) and follows "
    "softmax(l/T)") {
  const int vocab = 6;
  const std::vector<float> l = {1.0f, 2.0f, 0.5f, 2.0f, -1.0f, 0.0f};
  RowStatsScratch scratch;
  const float temperature = 0.7f;
  std::map<int, int> counts;
  const int draws = 30000;
  for (int step = 0; step < draws; ++step) {
    const RowStats s = ComputeRowStats(l.data(), vocab, Request(3, step, temperature), &scratch);
    const RowStats again =
        ComputeRowStats(l.data(), vocab, Request(3, step, temperature), &scratch);
    REQUIRE(s.token == again.token);
    ++counts[s.token];
  }
  double z = 0;
  for (float x : l) z += std::exp(x / temperature);
  for (int i = 0; i < vocab; ++i) {
    const double p = std::exp(l[i] / temperature) / z;
    const double sigma = std::sqrt(p * (1 - p) / draws);
    INFO("token " << i);
    CHECK(counts[i] / static_cast<double>(draws) == Approx(p).margin(5 * sigma + 1e-4));
  }
  // token_prob is the untempered probability.
  const RowStats s = ComputeRowStats(l.data(), vocab, Request(3, 1, temperature), &scratch);
  double z1 = 0;
  for (float x : l) z1 += std::exp(x);
  CHECK(s.token_prob == Approx(std::exp(l[s.token]) / z1).epsilon(1e-5));
  // Different seeds give different streams.
  int differ = 0;
  for (int step = 0; step < 200; ++step) {
    differ +=
        ComputeRowStats(l.data(), vocab, Request(3, step, 1.0f, 0, 1.0f, 1), &scratch).token !=
        ComputeRowStats(l.data(), vocab, Request(3, step, 1.0f, 0, 1.0f, 2), &scratch).token;
  }
  CHECK(differ > 50);
}

TEST_CASE("cpu_row_stats: top-k and top-p restrict the sampled set") {
  const int vocab = 6;
  // Sorted order by value: 1 (3.0), 3 (2.9), 0 (1.0), 2 (0.5), 5 (0.0), 4 (-1.0).
  const std::vector<float> l = {1.0f, 3.0f, 0.5f, 2.9f, -1.0f, 0.0f};
  RowStatsScratch scratch;
  std::map<int, int> k2, k1, p_small, p_mid;
  for (int step = 0; step < 2000; ++step) {
    ++k2[ComputeRowStats(l.data(), vocab, Request(0, step, 5.0f, 2), &scratch).token];
    ++k1[ComputeRowStats(l.data(), vocab, Request(0, step, 5.0f, 1), &scratch).token];
    ++p_small[ComputeRowStats(l.data(), vocab, Request(0, step, 1.0f, 0, 0.01f), &scratch).token];
    // At T=1: p(1) ~ 0.45, p(3) ~ 0.41: top_p 0.5 keeps {1, 3} (exclusive cumsum 0.45 <= 0.5).
    ++p_mid[ComputeRowStats(l.data(), vocab, Request(0, step, 1.0f, 0, 0.5f), &scratch).token];
  }
  CHECK(k2.size() == 2);
  CHECK(k2.count(1) == 1);
  CHECK(k2.count(3) == 1);
  CHECK(k1.size() == 1);
  CHECK(k1.count(1) == 1);
  CHECK(p_small.size() == 1);
  CHECK(p_small.count(1) == 1);
  CHECK(p_mid.size() == 2);
  CHECK(p_mid.count(3) == 1);
}

TEST_CASE("cpu_row_stats: logprobs and top tokens against a double log_softmax") {
  const int vocab = 5000;
  std::vector<float> l = RandomVector(vocab, 9, 4.0f);
  l[123] = l[4000] = 20.0f;  // a tie at the top: the lower id first
  l[77] = -1e4f;             // a token whose probability underflows float
  RowStatsScratch scratch;
  double m = -1e300;
  for (float x : l) m = std::max(m, static_cast<double>(x));
  double z = 0;
  for (float x : l) z += std::exp(x - m);
  auto log_softmax = [&](int id) { return (l[id] - m) - std::log(z); };
  // The reference order: value desc, id asc, by a full sort.
  std::vector<int32_t> order(vocab);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return l[a] > l[b]; });
  for (float temperature : {0.0f, 0.8f}) {
    for (int n : {0, 1, 5, kMaxTopLogprobs}) {
      INFO("temperature " << temperature << " n " << n);
      LogitsRowRequest request = Request(3, 2, temperature);
      request.sampling.top_logprobs = n;
      const RowStats s = ComputeRowStats(l.data(), vocab, request, &scratch);
      // The normalizer is the entropy pass's float32 running sum, rescaled as the maximum
      // grows: ~1e-5 from the double sum at this vocabulary.
      CHECK(s.token_logprob == Approx(log_softmax(s.token)).margin(5e-5));
      CHECK(std::exp(s.token_logprob) == Approx(s.token_prob).epsilon(1e-5));
      REQUIRE(s.top_count == n);
      for (int i = 0; i < n; ++i) {
        INFO("rank " << i);
        CHECK(s.top_tokens[i] == order[i]);
        CHECK(s.top_logprobs[i] == Approx(log_softmax(order[i])).margin(5e-5));
      }
      if (n > 1) {
        CHECK(s.top_tokens[0] == 123);
        CHECK(s.top_tokens[1] == 4000);
      }
    }
  }
  // The underflowing token still has a finite logprob.
  std::vector<float> tiny = {0.0f, -1e4f};
  LogitsRowRequest request = Request(0, 0, 0.0f);
  request.sampling.top_logprobs = 2;
  const RowStats s = ComputeRowStats(tiny.data(), 2, request, &scratch);
  CHECK(s.top_count == 2);
  CHECK(s.top_logprobs[1] == Approx(-1e4).epsilon(1e-6));
  // More alternatives than the vocabulary: the whole vocabulary, in order.
  request.sampling.top_logprobs = kMaxTopLogprobs;
  CHECK(ComputeRowStats(tiny.data(), 2, request, &scratch).top_count == 2);
}

}  // namespace
}  // namespace dllm

namespace dllm {
namespace {

// The CPU backend's results must not depend on which kernels a third-party BLAS picks for the
// CPU it finds (Debian's OpenBLAS 0.3.21 falls back to different kernels on CPUs it does not
// know), so the engine links no BLAS at all: none may be mapped into this process.
TEST_CASE("cpu_backend: the engine loads no BLAS library") {
  std::ifstream maps("/proc/self/maps");
  REQUIRE(maps.good());
  std::string line;
  int libraries = 0;
  while (std::getline(maps, line)) {
    if (line.find(".so") == std::string::npos) continue;
    ++libraries;
    INFO(line);
    CHECK(line.find("blas") == std::string::npos);
    CHECK(line.find("mkl") == std::string::npos);
    CHECK(line.find("lapack") == std::string::npos);
  }
  CHECK(libraries > 0);  // the scan saw the shared libraries at all
}

}  // namespace
}  // namespace dllm
// NOLINTEND(bugprone-implicit-widening-of-multiplication-result)
