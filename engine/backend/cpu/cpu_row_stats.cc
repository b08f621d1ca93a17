#include "engine/backend/cpu/cpu_row_stats.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <numeric>

#include "engine/backend/counter_rng.h"
#include "engine/backend/kernel_math.h"

namespace dllm {
namespace {

// Gumbel-max over ids[0, count) (any order); ties go to the lowest id.
int32_t GumbelMaxOver(const float* logits, const int32_t* ids, int64_t count,
                      const LogitsRowRequest& request) {
  const SamplingParams& sp = request.sampling;
  float best = -INFINITY;
  int32_t best_id = -1;
  for (int64_t i = 0; i < count; ++i) {
    const int32_t id = ids[i];
    const float u =
        CounterUniform(sp.seed, request.position, request.step, static_cast<uint32_t>(id));
    const float score = kmath::GumbelScore(logits[id], sp.temperature, u);
    if (best_id < 0 || kmath::RanksBefore(score, id, best, best_id)) {
      best = score;
      best_id = id;
    }
  }
  return best_id;
}

int32_t SampleToken(const float* logits, int vocab, const LogitsRowRequest& request,
                    RowStatsScratch* scratch) {
  const SamplingParams& sp = request.sampling;
  std::vector<int32_t>& order = scratch->order;
  order.resize(static_cast<size_t>(vocab));
  std::iota(order.begin(), order.end(), 0);
  const bool top_k_on = sp.top_k > 0 && sp.top_k < vocab;
  const bool top_p_on = sp.top_p < 1.0f;
  if (!top_k_on && !top_p_on) return GumbelMaxOver(logits, order.data(), vocab, request);

  // Tempered logits; the (value desc, id asc) order is the same for logits and logits / T.
  std::vector<float>& z = scratch->values;
  z.resize(static_cast<size_t>(vocab));
  for (int i = 0; i < vocab; ++i) {
    // NaN would break the strict weak order the sorts rely on; it never wins anyway.
    z[i] = std::isnan(logits[i]) ? -INFINITY : logits[i] / sp.temperature;
  }
  auto before = [&z](int32_t a, int32_t b) { return kmath::RanksBefore(z[a], a, z[b], b); };

  int64_t kept = vocab;
  if (top_p_on) {
    std::sort(order.begin(), order.end(), before);
    // Normalizer in id order (fixed), then the cumulative sum in rank order.
    const float z_max = z[order[0]];
    float sum = 0.0f;
    for (int i = 0; i < vocab; ++i) sum += std::exp(z[i] - z_max);
    float cumulative = 0.0f;
    kept = 1;
    for (int64_t r = 0; r + 1 < vocab; ++r) {
      cumulative += std::exp(z[order[r]] - z_max) / sum;
      if (cumulative > sp.top_p) break;
      kept = r + 2;
    }
  }
  if (top_k_on && sp.top_k < kept) {
    if (!top_p_on) {
      std::partial_sort(order.begin(), order.begin() + sp.top_k, order.end(), before);
    }
    kept = sp.top_k;
  }
  return GumbelMaxOver(logits, order.data(), kept, request);
}

// The first n tokens in (logit desc, id asc) order by insertion into a sorted list of n: ids
// come in ascending order, so an equal value never ranks before one already listed.
void ListTopTokens(const float* logits, int vocab, int n, const kmath::EntropyState& entropy,
                   RowStats* stats) {
  std::array<float, kMaxTopLogprobs> values{};
  auto& ids = stats->top_tokens;
  int count = 0;
  for (int i = 0; i < vocab; ++i) {
    const float v = logits[i];
    if (count == n && !kmath::RanksBefore(v, i, values[n - 1], ids[n - 1])) continue;
    int j = count < n ? count++ : n - 1;
    for (; j > 0 && kmath::RanksBefore(v, i, values[j - 1], ids[j - 1]); --j) {
      values[j] = values[j - 1];
      ids[j] = ids[j - 1];
    }
    values[j] = v;
    ids[j] = i;
  }
  stats->top_count = count;
  for (int k = 0; k < count; ++k) {
    stats->top_logprobs[k] = kmath::EntropyStateLogProb(entropy, values[k]);
  }
}

}  // namespace

RowStats ComputeRowStats(const float* logits, int vocab, const LogitsRowRequest& request,
                         RowStatsScratch* scratch) {
  kmath::EntropyState entropy;
  kmath::Top2 top2;
  bool finite = true;
  for (int i = 0; i < vocab; ++i) {
    finite &= std::isfinite(logits[i]);
    kmath::EntropyAdd(&entropy, logits[i]);
    kmath::Top2Add(&top2, logits[i], i);
  }
  RowStats stats;
  stats.position = request.position;
  if (!finite) {  // see the header: the caller reports it instead of committing garbage
    stats.argmax_token = stats.token = -1;
    stats.argmax_prob = stats.entropy_nats = stats.margin = stats.token_prob = stats.token_logprob =
        std::nanf("");
    return stats;
  }
  stats.argmax_token = top2.id1;
  stats.argmax_prob = kmath::EntropyStateProb(entropy, top2.value1);
  stats.entropy_nats = kmath::EntropyNats(entropy);
  const float p2 = top2.id2 >= 0 ? kmath::EntropyStateProb(entropy, top2.value2) : 0.0f;
  stats.margin = stats.argmax_prob - p2;
  if (request.sampling.temperature <= 0.0f) {
    stats.token = stats.argmax_token;
    stats.token_prob = stats.argmax_prob;
  } else {
    stats.token = SampleToken(logits, vocab, request, scratch);
    stats.token_prob = kmath::EntropyStateProb(entropy, logits[stats.token]);
  }
  stats.token_logprob = kmath::EntropyStateLogProb(entropy, logits[stats.token]);
  const int top_n = std::clamp(request.sampling.top_logprobs, 0, std::min(kMaxTopLogprobs, vocab));
  if (top_n > 0) ListTopTokens(logits, vocab, top_n, entropy, &stats);
  return stats;
}

}  // namespace dllm
