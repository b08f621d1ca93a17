// Elastic-Cache (Nguyen-Tri et al., "Attention Is All You Need for KV Cache in Diffusion
// LLMs", arXiv 2510.14973), as its public code (llada/generate.py, modeling_llada.py) runs it,
// written anew.
//
// The first step is full. Every later step recomputes, at every layer, the decoder's
// candidates (Elastic decodes in a sliding window of the leftmost beta masks: with the
// window schedule, w = beta = 16), the tokens committed in the previous step, and the tracked
// tokens: per layer, the non-mask token the window's rows attend to most (attention summed
// over the window rows and heads), the union over layers. All other K/V are read from the
// cache. During the step, layer by layer, the tracked tokens' attention rows are compared with
// their rows of the previous step; at the first layer l where the mean cosine similarity
// falls below gamma, layers l+1 .. L-1 are recomputed for every row, from the cached input
// hidden states of the rows the step did not compute (and the fresh ones of those it did);
// shallower layers keep their cache. The engine runs that as a second pass of the step
// (CachePolicy::RecomputeFromLayer), whose predictions replace the first pass's.
//
// Choices where this engine differs from the code, tested in
// tests/engine/decoding/elastic_policy_test.cc:
//   - similarity: cosine over the keys of the head-averaged attention rows, then the mean over
//     the tracked tokens. The code takes the cosine over the head axis for each (token, key)
//     and averages; the engine's attention maps are head-averaged (AttentionMaps).
//   - previous attention: the rows of the last step that computed the token (the tracked
//     tokens are query rows every step, so that is the previous step for all but a newly
//     tracked one); the code recomputes them from the token's cached query and the previous
//     keys. A token with no rows yet is left out of the test.
//   - a second pass's deep-layer rows replace the first pass's as the "previous" rows; the
//     tracked tokens are chosen from the first pass's attention.
// Decision cost: the attention maps of both passes (AttentionMaps::seconds), the drift test
// and the tracking, and Plan/Observe. The first pass's deep layers for its few query rows are
// work the code does not do (it switches to all rows inside one forward).
#ifndef DLLM_ENGINE_DECODING_ELASTIC_POLICY_H_
#define DLLM_ENGINE_DECODING_ELASTIC_POLICY_H_

#include <memory>

#include "engine/decoding/cache_policy.h"

namespace dllm {

std::unique_ptr<CachePolicy> MakeElasticPolicy(float gamma);

}  // namespace dllm

#endif  // DLLM_ENGINE_DECODING_ELASTIC_POLICY_H_
