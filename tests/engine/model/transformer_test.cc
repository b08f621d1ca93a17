#include "engine/model/transformer.h"

#include <bit>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "engine/backend/backend_factory.h"
#include "engine/kv/kv_pool.h"
#include "engine/model/forward_inspection.h"
#include "engine/model/forward_random_model.h"

namespace dllm {
namespace {

using Logits = std::vector<std::vector<std::vector<float>>>;

struct Harness {
  std::unique_ptr<Backend> backend;
  std::unique_ptr<RandomModel> model;
  std::unique_ptr<Transformer> transformer;
  std::unique_ptr<KvPool> pool;
};

Harness MakeHarness(const ModelConfig& config, uint64_t seed = 11, int threads = 2) {
  Harness h;
  auto backend = CreateBackend("cpu", threads);
  REQUIRE(backend.ok());
  h.backend = std::move(*backend);
  h.model = MakeRandomModel(config, seed);
  auto t = Transformer::Create(config, h.model->weights, h.backend.get());
  REQUIRE(t.ok());
  h.transformer = std::move(*t);
  h.pool = std::make_unique<KvPool>(h.backend.get(), config.kv_layout(), int64_t{1} << 28);
  return h;
}

std::vector<int32_t> RandomTokens(int n, int vocab, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int32_t> d(0, vocab - 1);
  std::vector<int32_t> t(n);
  for (int32_t& x : t) x = d(gen);
  return t;
}

std::vector<int32_t> Iota(int n) {
  std::vector<int32_t> v(n);
  std::iota(v.begin(), v.end(), 0);
  return v;
}

SequenceStep Step(KvSlab* kv, const std::vector<int32_t>& tokens, std::vector<int32_t> query,
                  std::vector<int32_t> predict, int32_t step = 0, float temperature = 0.0f) {
  SequenceStep s;
  s.kv = kv;
  s.tokens = tokens;
  s.query_positions = std::move(query);
  s.predict_positions = std::move(predict);
  s.step = step;
  s.sampling.temperature = temperature;
  s.sampling.seed = 99;
  return s;
}

double RelErr(const std::vector<float>& got, const std::vector<float>& want) {
  double max_diff = 0, max_ref = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    max_diff = std::max(max_diff, std::abs(static_cast<double>(got[i]) - want[i]));
    max_ref = std::max(max_ref, std::abs(static_cast<double>(want[i])));
  }
  return max_diff / std::max(max_ref, 1e-30);
}

bool SameBits(const RowStats& a, const RowStats& b) {
  return a.position == b.position && a.argmax_token == b.argmax_token && a.token == b.token &&
         std::bit_cast<uint32_t>(a.argmax_prob) == std::bit_cast<uint32_t>(b.argmax_prob) &&
         std::bit_cast<uint32_t>(a.entropy_nats) == std::bit_cast<uint32_t>(b.entropy_nats) &&
         std::bit_cast<uint32_t>(a.margin) == std::bit_cast<uint32_t>(b.margin) &&
         std::bit_cast<uint32_t>(a.token_prob) == std::bit_cast<uint32_t>(b.token_prob);
}

ModelConfig LladaConfig() {
  return RandomModelConfig(ModelFamily::kLlada, 64, 2, 4, 4, 128, 300, 4096);
}
ModelConfig DreamConfig() {
  return RandomModelConfig(ModelFamily::kDream, 96, 2, 6, 2, 160, 320, 4096);
}
// Big enough for several GEMM column chunks, tile tails and multi-threaded GEMMs.
ModelConfig MidConfig() {
  return RandomModelConfig(ModelFamily::kDream, 256, 2, 4, 2, 512, 1024, 4096);
}

TEST_CASE("transformer: a partial step reproduces the full step's rows") {
  for (const ModelConfig& config : {LladaConfig(), DreamConfig(), MidConfig()}) {
    Harness h = MakeHarness(config);
    const int n = 40;
    const std::vector<int32_t> tokens = RandomTokens(n, config.vocab_size, 5);
    auto slab = h.pool->Allocate(n + 8);
    REQUIRE(slab.ok());
    StepBatch full;
    full.sequences.push_back(Step(slab->get(), tokens, Iota(n), Iota(n)));
    StepResult full_result;
    Logits full_logits;
    REQUIRE(ForwardWithLogits(*h.transformer, full, DebugLogitsRows::kPredicted, &full_result,
                              &full_logits)
                .ok());
    REQUIRE(full_result[0].size() == static_cast<size_t>(n));

    std::mt19937 gen(17);
    for (int trial = 0; trial < 6; ++trial) {
      std::vector<int32_t> query, predict;
      for (int p = 0; p < n; ++p) {
        if (gen() % 3 == 0) query.push_back(p);
        if (gen() % 4 == 0) predict.push_back(p);
      }
      if (trial == 0) query.clear();  // rows are added for the predictions alone
      if (trial == 1) predict = {0, 1, n - 1};
      StepBatch partial;
      partial.sequences.push_back(Step(slab->get(), tokens, query, predict));
      StepResult result;
      Logits logits;
      REQUIRE(
          ForwardWithLogits(*h.transformer, partial, DebugLogitsRows::kPredicted, &result, &logits)
              .ok());
      REQUIRE(result[0].size() == predict.size());
      for (size_t j = 0; j < predict.size(); ++j) {
        const RowStats& got = result[0][j];
        const RowStats& want = full_result[0][predict[j]];
        INFO("family " << static_cast<int>(config.family) << " trial " << trial << " position "
                       << predict[j]);
        CHECK(got.position == predict[j]);
        CHECK(got.argmax_token == want.argmax_token);
        CHECK(got.argmax_prob == Approx(want.argmax_prob).epsilon(1e-5));
        CHECK(got.entropy_nats == Approx(want.entropy_nats).epsilon(1e-5).margin(1e-7));
        CHECK(got.margin == Approx(want.margin).epsilon(1e-5).margin(1e-7));
        CHECK(RelErr(logits[0][j], full_logits[0][predict[j]]) <= 1e-5);
      }
    }
  }
}

// The last layer runs its query side on the predicting rows only (when there are fewer of them
// than computed rows). Reference: the same rows predicted in a step that predicts every row,
// where nothing is left out. Several sequences, one predicting nothing, check the row mapping.
TEST_CASE("transformer: the last layer on the predicting rows alone changes no bit") {
  for (const ModelConfig& config : {LladaConfig(), DreamConfig(), MidConfig()}) {
    Harness h = MakeHarness(config);
    const std::vector<int> lengths = {40, 23, 31};
    const std::vector<std::vector<int32_t>> subsets = {{0, 7, 8, 39}, {}, {5, 6, 7, 8, 9, 30}};
    std::vector<std::vector<int32_t>> tokens;
    std::vector<std::unique_ptr<KvSlab>> all_slabs, subset_slabs;
    StepBatch everything, subset;
    for (size_t i = 0; i < lengths.size(); ++i) {
      tokens.push_back(RandomTokens(lengths[i], config.vocab_size, 50 + i));
      auto a = h.pool->Allocate(lengths[i]);
      auto b = h.pool->Allocate(lengths[i]);
      REQUIRE((a.ok() && b.ok()));
      all_slabs.push_back(std::move(*a));
      subset_slabs.push_back(std::move(*b));
      everything.sequences.push_back(
          Step(all_slabs.back().get(), tokens[i], Iota(lengths[i]), Iota(lengths[i])));
      subset.sequences.push_back(
          Step(subset_slabs.back().get(), tokens[i], Iota(lengths[i]), subsets[i]));
    }
    StepResult want, got;
    Logits want_logits, got_logits;
    REQUIRE(ForwardWithLogits(*h.transformer, everything, DebugLogitsRows::kPredicted, &want,
                              &want_logits)
                .ok());
    REQUIRE(
        ForwardWithLogits(*h.transformer, subset, DebugLogitsRows::kPredicted, &got, &got_logits)
            .ok());
    for (size_t i = 0; i < lengths.size(); ++i) {
      REQUIRE(got[i].size() == subsets[i].size());
      for (size_t j = 0; j < subsets[i].size(); ++j) {
        INFO("family " << static_cast<int>(config.family) << " sequence " << i << " position "
                       << subsets[i][j]);
        CHECK(SameBits(got[i][j], want[i][subsets[i][j]]));
        CHECK(std::memcmp(got_logits[i][j].data(), want_logits[i][subsets[i][j]].data(),
                          got_logits[i][j].size() * sizeof(float)) == 0);
      }
      // Every layer's K/V, the last one's included, is written for every row.
      const int64_t plane = int64_t{config.num_kv_heads} * config.head_dim;
      const int capacity = all_slabs[i]->capacity_positions();
      for (int64_t p = 0; p < 2 * int64_t{config.num_layers}; ++p) {
        std::vector<float> a(lengths[i] * plane), b(lengths[i] * plane);
        REQUIRE(h.backend->DownloadFloats(all_slabs[i]->buffer(), p * capacity * plane, a).ok());
        REQUIRE(h.backend->DownloadFloats(subset_slabs[i]->buffer(), p * capacity * plane, b).ok());
        INFO("sequence " << i << " layer " << p / 2 << (p % 2 ? " V" : " K"));
        CHECK(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
      }
    }
  }
}

TEST_CASE("transformer: Dream predicts position p from hidden row p-1, p=0 from row 0") {
  const ModelConfig config = DreamConfig();
  Harness h = MakeHarness(config);
  const int n = 12;
  const std::vector<int32_t> tokens = RandomTokens(n, config.vocab_size, 8);
  auto slab = h.pool->Allocate(n);
  REQUIRE(slab.ok());
  StepBatch raw;
  raw.sequences.push_back(Step(slab->get(), tokens, Iota(n), Iota(n)));
  StepResult raw_result, shifted_result;
  Logits raw_logits, shifted_logits;
  REQUIRE(
      ForwardWithLogits(*h.transformer, raw, DebugLogitsRows::kHiddenRows, &raw_result, &raw_logits)
          .ok());
  REQUIRE(ForwardWithLogits(*h.transformer, raw, DebugLogitsRows::kPredicted, &shifted_result,
                            &shifted_logits)
              .ok());
  for (int p = 0; p < n; ++p) {
    CHECK(shifted_logits[0][p] == raw_logits[0][std::max(p - 1, 0)]);
    CHECK(shifted_result[0][p].position == p);
    CHECK(shifted_result[0][p].argmax_token == raw_result[0][std::max(p - 1, 0)].argmax_token);
  }
  // Forward() applies the same shift.
  StepResult plain;
  REQUIRE(h.transformer->Forward(raw, &plain).ok());
  for (int p = 0; p < n; ++p) CHECK(SameBits(plain[0][p], shifted_result[0][p]));
}

TEST_CASE("transformer: results are bitwise batch-invariant") {
  for (const ModelConfig& config : {DreamConfig(), MidConfig()}) {
    Harness h = MakeHarness(config, 3, 3);
    const std::vector<int32_t> a = RandomTokens(33, config.vocab_size, 1);
    const std::vector<int32_t> b = RandomTokens(70, config.vocab_size, 2);
    const std::vector<int32_t> c = RandomTokens(5, config.vocab_size, 3);
    auto slab_a = h.pool->Allocate(40);
    auto slab_a2 = h.pool->Allocate(33);
    auto slab_b = h.pool->Allocate(70);
    auto slab_c = h.pool->Allocate(5);
    REQUIRE(slab_a.ok());
    REQUIRE(slab_a2.ok());
    REQUIRE(slab_b.ok());
    REQUIRE(slab_c.ok());
    // Full step, greedy and sampled.
    for (float temperature : {0.0f, 0.8f}) {
      StepBatch alone;
      alone.sequences.push_back(Step(slab_a->get(), a, Iota(33), {3, 10, 20, 32}, 4, temperature));
      StepResult alone_result;
      Logits alone_logits;
      REQUIRE(ForwardWithLogits(*h.transformer, alone, DebugLogitsRows::kPredicted, &alone_result,
                                &alone_logits)
                  .ok());

      StepBatch batched;
      batched.sequences.push_back(Step(slab_b->get(), b, Iota(70), Iota(70), 1, 1.0f));
      batched.sequences.push_back(
          Step(slab_a2->get(), a, Iota(33), {3, 10, 20, 32}, 4, temperature));
      batched.sequences.push_back(Step(slab_c->get(), c, Iota(5), {4}, 0, 0.0f));
      StepResult batched_result;
      Logits batched_logits;
      REQUIRE(ForwardWithLogits(*h.transformer, batched, DebugLogitsRows::kPredicted,
                                &batched_result, &batched_logits)
                  .ok());
      for (size_t j = 0; j < 4; ++j) {
        CHECK(SameBits(alone_result[0][j], batched_result[1][j]));
        CHECK(std::memcmp(alone_logits[0][j].data(), batched_logits[1][j].data(),
                          alone_logits[0][j].size() * 4) == 0);
      }

      // Partial steps on top of those caches, alone vs batched with a full step of b.
      StepBatch partial_alone;
      partial_alone.sequences.push_back(
          Step(slab_a->get(), a, {5, 6, 7, 30}, {6, 7, 31}, 5, temperature));
      StepBatch partial_batched;
      partial_batched.sequences.push_back(Step(slab_c->get(), c, {1, 2}, {2}, 1, 0.5f));
      partial_batched.sequences.push_back(
          Step(slab_a2->get(), a, {5, 6, 7, 30}, {6, 7, 31}, 5, temperature));
      partial_batched.sequences.push_back(Step(slab_b->get(), b, Iota(70), {0, 69}, 2, 0.0f));
      StepResult pa, pb;
      REQUIRE(h.transformer->Forward(partial_alone, &pa).ok());
      REQUIRE(h.transformer->Forward(partial_batched, &pb).ok());
      for (size_t j = 0; j < 3; ++j) CHECK(SameBits(pa[0][j], pb[1][j]));
    }
  }
}

TEST_CASE("transformer: sampling is keyed by (seed, position, step)") {
  const ModelConfig config = LladaConfig();
  Harness h = MakeHarness(config);
  const std::vector<int32_t> tokens = RandomTokens(20, config.vocab_size, 4);
  auto slab = h.pool->Allocate(20);
  REQUIRE(slab.ok());
  auto run = [&](int32_t step, uint64_t seed) {
    StepBatch batch;
    batch.sequences.push_back(Step(slab->get(), tokens, Iota(20), Iota(20), step, 1.5f));
    batch.sequences[0].sampling.seed = seed;
    StepResult r;
    REQUIRE(h.transformer->Forward(batch, &r).ok());
    std::vector<int32_t> out;
    for (const RowStats& s : r[0]) out.push_back(s.token);
    return out;
  };
  const std::vector<int32_t> first = run(3, 7);
  CHECK(run(3, 7) == first);
  CHECK(run(4, 7) != first);
  CHECK(run(3, 8) != first);
}

TEST_CASE("transformer: malformed batches are INVALID_ARGUMENT") {
  const ModelConfig config = LladaConfig();
  Harness h = MakeHarness(config);
  const std::vector<int32_t> tokens = RandomTokens(10, config.vocab_size, 4);
  auto slab = h.pool->Allocate(10);
  auto small = h.pool->Allocate(5);
  REQUIRE(slab.ok());
  REQUIRE(small.ok());
  std::vector<int32_t> bad_tokens = tokens;
  bad_tokens[3] = config.vocab_size;
  std::vector<int32_t> negative_tokens = tokens;
  negative_tokens[0] = -1;
  const std::vector<int32_t> empty;

  std::vector<StepBatch> bad;
  auto add = [&](SequenceStep s) {
    StepBatch b;
    b.sequences.push_back(std::move(s));
    bad.push_back(std::move(b));
  };
  add(Step(nullptr, tokens, Iota(10), {1}));               // no slab
  add(Step(slab->get(), tokens, {3, 2}, {1}));             // unsorted
  add(Step(slab->get(), tokens, {2, 2}, {1}));             // duplicate
  add(Step(slab->get(), tokens, {0, 10}, {1}));            // out of range
  add(Step(slab->get(), tokens, {-1, 0}, {1}));            // negative
  add(Step(slab->get(), tokens, Iota(10), {5, 4}));        // predict unsorted
  add(Step(slab->get(), tokens, Iota(10), {10}));          // predict out of range
  add(Step(slab->get(), bad_tokens, Iota(10), {1}));       // token id >= vocab
  add(Step(slab->get(), negative_tokens, Iota(10), {1}));  // negative token id
  add(Step(small->get(), tokens, Iota(10), {1}));          // slab too small
  add(Step(slab->get(), empty, {}, {}));                   // no tokens
  // Bad sampling parameters never reach the forward pass: Engine::Submit refuses them
  // (ValidateParams; "Submit refuses bad sampling parameters" in engine_integration_test).
  {
    StepBatch shared;  // one slab used by two sequences
    shared.sequences.push_back(Step(slab->get(), tokens, Iota(10), {1}));
    shared.sequences.push_back(Step(slab->get(), tokens, Iota(10), {2}));
    bad.push_back(std::move(shared));
  }
  for (size_t i = 0; i < bad.size(); ++i) {
    StepResult r;
    INFO("case " << i);
    const absl::Status st = h.transformer->Forward(bad[i], &r);
    CHECK(st.code() == absl::StatusCode::kInvalidArgument);
    CHECK_FALSE(st.message().empty());
  }
  // An empty batch and a sequence with nothing to do are fine.
  StepResult r;
  CHECK(h.transformer->Forward(StepBatch{}, &r).ok());
  CHECK(r.empty());
  StepBatch idle;
  idle.sequences.push_back(Step(slab->get(), tokens, {}, {}));
  CHECK(h.transformer->Forward(idle, &r).ok());
  REQUIRE(r.size() == 1);
  CHECK(r[0].empty());
}

TEST_CASE("transformer: Create rejects weights that do not match the config") {
  const ModelConfig config = DreamConfig();
  auto backend = CreateBackend("cpu", 1);
  REQUIRE(backend.ok());
  auto model = MakeRandomModel(config, 1);
  ModelConfig wrong = config;
  wrong.intermediate_size += 1;
  CHECK(Transformer::Create(wrong, model->weights, backend->get()).status().code() ==
        absl::StatusCode::kInvalidArgument);
  ModelWeights missing_bias = model->weights;
  missing_bias.layers[1].k_bias.reset();
  CHECK(Transformer::Create(config, missing_bias, backend->get()).status().code() ==
        absl::StatusCode::kInvalidArgument);
  CHECK(Transformer::Create(config, model->weights, nullptr).status().code() ==
        absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace dllm

namespace dllm {
namespace {

TEST_CASE("transformer: results do not depend on the backend's thread count") {
  const ModelConfig config = MidConfig();
  Harness one = MakeHarness(config, 5, 1);
  Harness four = MakeHarness(config, 5, 4);
  const std::vector<int32_t> tokens = RandomTokens(50, config.vocab_size, 6);
  auto slab1 = one.pool->Allocate(50);
  auto slab4 = four.pool->Allocate(50);
  REQUIRE(slab1.ok());
  REQUIRE(slab4.ok());
  for (float temperature : {0.0f, 1.0f}) {
    StepBatch b1, b4;
    b1.sequences.push_back(Step(slab1->get(), tokens, Iota(50), Iota(50), 2, temperature));
    b4.sequences.push_back(Step(slab4->get(), tokens, Iota(50), Iota(50), 2, temperature));
    StepResult r1, r4;
    REQUIRE(one.transformer->Forward(b1, &r1).ok());
    REQUIRE(four.transformer->Forward(b4, &r4).ok());
    for (int p = 0; p < 50; ++p) CHECK(SameBits(r1[0][p], r4[0][p]));
  }
}

}  // namespace
}  // namespace dllm

namespace dllm {
namespace {

// Elastic-Cache's mechanics: the hidden states a step stores, read back as the inputs of a
// later layer, reproduce the step; a pass over every row from a layer on rewrites the deep
// layers' K/V from stale inputs exactly as a forward from those inputs would.
TEST_CASE("transformer: stored hidden states restart the forward at a later layer") {
  for (ModelConfig config : {LladaConfig(), DreamConfig()}) {
    config =
        RandomModelConfig(config.family, config.hidden_size, 4, config.num_heads,
                          config.num_kv_heads, config.intermediate_size, config.vocab_size, 4096);
    Harness h = MakeHarness(config);
    const int n = 24;
    const std::vector<int32_t> tokens = RandomTokens(n, config.vocab_size, 8);
    auto slab = h.pool->Allocate(n, /*hidden_states=*/true);
    REQUIRE(slab.ok());
    std::vector<int32_t> predict = {3, 9, 17, 23};
    SequenceStep full = Step(slab->get(), tokens, Iota(n), predict);
    full.store_hidden_states = true;
    StepResult want;
    REQUIRE(h.transformer->Forward(StepBatch{{full}}, &want).ok());
    for (int first = 1; first < config.num_layers; ++first) {
      INFO("family " << static_cast<int>(config.family) << " first_layer " << first);
      SequenceStep again = full;
      again.first_layer = first;
      StepResult got;
      REQUIRE(h.transformer->Forward(StepBatch{{again}}, &got).ok());
      REQUIRE(got[0].size() == predict.size());
      for (size_t j = 0; j < predict.size(); ++j) CHECK(SameBits(got[0][j], want[0][j]));
    }
    // Refused: a later first layer next to another sequence, or without hidden states.
    auto plain = h.pool->Allocate(n);
    REQUIRE(plain.ok());
    SequenceStep late = full;
    late.first_layer = 2;
    StepResult r;
    CHECK(h.transformer->Forward(StepBatch{{late, full}}, &r).code() ==
          absl::StatusCode::kInvalidArgument);
    late.kv = plain->get();
    CHECK(h.transformer->Forward(StepBatch{{late}}, &r).code() ==
          absl::StatusCode::kInvalidArgument);
    late.first_layer = config.num_layers;
    late.kv = slab->get();
    CHECK(h.transformer->Forward(StepBatch{{late}}, &r).code() ==
          absl::StatusCode::kInvalidArgument);
  }
}

}  // namespace
}  // namespace dllm
