// Test helper: EntropyCache parameters (tau in nats, recent k), shared by the policy, worker
// and integration tests.
#ifndef DLLM_TESTS_ENGINE_DECODING_ENTROPY_CACHE_PARAMS_H_
#define DLLM_TESTS_ENGINE_DECODING_ENTROPY_CACHE_PARAMS_H_

#include "engine/engine.h"

namespace dllm::testing {

inline CacheParams EntropyCache(float tau, int k = 4) {
  CacheParams c;
  c.policy = CachePolicyKind::kEntropy;
  c.entropy_threshold = tau;
  c.recent_k = k;
  return c;
}

}  // namespace dllm::testing

#endif  // DLLM_TESTS_ENGINE_DECODING_ENTROPY_CACHE_PARAMS_H_
