// d2Cache (Jiang et al., "d2Cache: Accelerating Diffusion-Based LLMs via Dual Adaptive
// Caching"), as its public code (src/cache/d2cache.py) defines the cache, written anew.
//
// The first step is full; no later step is (no refresh at block starts). After step t the
// query rows of step t+1 are the union of:
//   1. masks by certainty density: score = confidence x density over the answer's masks
//      from the current block's start to a search end (the position where current_k masks
//      have been counted, rounded up to the end of its block); the current block's masks are
//      ranked first (their score gets the maximum score added); the top current_k are taken;
//   2. the tokens committed in step t (their cached K/V still encode [MASK]);
//   3. the attention-rollout nucleus: of the other canvas positions (prompt included), the top
//      rollout_p of step t's rollout importance (attention_rollout.h).
// Plus, always, the decoder's candidates (this engine predicts only rows it recomputes; with
// current_k >= the block length they are in 1. anyway).
//
// Certainty density of answer position i: sum_j d'(j) g(i - j) / sum_n g(n), with
// g(n) = exp(-n^2 / (2 sigma^2)), d'(j) = 1 for a decided position, 0 for a mask, the prompt
// side counted as decided and the far side as decided iff the answer's last position is (the
// padding of d2Cache's FFT convolution); the normalizer sums g over every integer.
//
// Choices where the public code's behaviour is not its evident intent, tested in
// tests/engine/decoding/d2cache_policy_test.cc:
//   - confidence: the latest argmax probability the engine predicted at a position. d2Cache's
//     code means to update its confidence cache this way, but its update writes to a copy, so
//     it keeps the step-0 values. A mask never predicted gets 1 / vocab, what d2Cache reads
//     from a row it did not compute (zero logits, a uniform distribution).
//   - d2Cache decodes in one block of the whole answer with certainty-guided decoding; here
//     the request's own schedule decides and commits, and the policy only picks the rows.
// Decision cost: the attention maps the forward computes for this policy (AttentionMaps::
// seconds), the rollout, and Plan/Observe.
#ifndef DLLM_ENGINE_DECODING_D2CACHE_POLICY_H_
#define DLLM_ENGINE_DECODING_D2CACHE_POLICY_H_

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "engine/decoding/cache_policy.h"

namespace dllm {

// Certainty density of every answer position; `decided` covers the answer only (nonzero =
// decided), `sigma` > 0.
std::vector<double> CertaintyDensity(std::span<const uint8_t> decided, double sigma);

// The policy; `vocab_size` > 0 sets the confidence of a never-predicted mask (1 / vocab_size).
std::unique_ptr<CachePolicy> MakeD2CachePolicy(int current_k, float rollout_p, float sigma,
                                               int vocab_size);

}  // namespace dllm

#endif  // DLLM_ENGINE_DECODING_D2CACHE_POLICY_H_
