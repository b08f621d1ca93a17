// KvLayout: the few numbers of a model that size its KV cache.
//
// The pool needs only these, not the whole model config (kv/ sits below model/). A slab
// holds [num_layers][2 (K, V)][positions][num_kv_heads * head_dim] elements.
#ifndef DLLM_ENGINE_KV_KV_LAYOUT_H_
#define DLLM_ENGINE_KV_KV_LAYOUT_H_

#include <cstdint>

namespace dllm {

struct KvLayout {
  int num_layers = 0;
  int num_kv_heads = 0;
  int head_dim = 0;

  // Bytes of K plus V for one position across all layers, in the given element size.
  int64_t BytesPerPosition(int bytes_per_element) const {
    return int64_t{2} * num_layers * num_kv_heads * head_dim * bytes_per_element;
  }
};

}  // namespace dllm

#endif  // DLLM_ENGINE_KV_KV_LAYOUT_H_
