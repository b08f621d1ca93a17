// RowStats of one fp32 logits row on the host: the CPU backend's LogitsStats, one row at a time.
//
// Statistics (argmax with lowest-id ties, its probability, entropy in nats, top1-top2 margin)
// are over softmax(logits) at temperature 1 and the full vocabulary, streamed in id order
// through kernel_math's EntropyAdd/Top2Add. The proposed token is the argmax at temperature 0;
// otherwise logits are divided by the temperature, filtered by top-p (keep the shortest prefix
// of the (value desc, id asc) order whose exclusive cumulative probability is <= top_p, i.e.
// Hugging Face's rule) and then top-k (first k of that order), and the token is the Gumbel-max
// argmax of logit/T + Gumbel(u) over the kept ids, u = CounterUniform(seed, position, step, id)
// (ties: lowest id). token_prob is the untempered, unfiltered probability of the token and
// token_logprob its log-probability. With sampling.top_logprobs = n > 0 a second pass lists
// the n first tokens of the (logit desc, id asc) order; with n = 0 that pass never runs.
// A row with any NaN or infinite logit (corrupt or overflowing weights) has no meaningful
// statistics: it yields argmax_token = token = -1 and NaN probabilities, which the scheduler
// turns into an INTERNAL error naming the cause (Sequence::ApplyStep).
#ifndef DLLM_ENGINE_BACKEND_CPU_CPU_ROW_STATS_H_
#define DLLM_ENGINE_BACKEND_CPU_CPU_ROW_STATS_H_

#include <cstdint>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/core/row_stats.h"

namespace dllm {

// Reusable per-thread buffers for the sampling filter.
struct RowStatsScratch {
  std::vector<int32_t> order;
  std::vector<float> values;
};

RowStats ComputeRowStats(const float* logits, int vocab, const LogitsRowRequest& request,
                         RowStatsScratch* scratch);

}  // namespace dllm

#endif  // DLLM_ENGINE_BACKEND_CPU_CPU_ROW_STATS_H_
