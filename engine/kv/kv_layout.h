// KvLayout: the few numbers of a model that size its KV cache.
//
// The pool needs only these, not the whole model config (kv/ sits below model/). A slab
// holds [num_layers][2 (K, V)][positions][num_kv_heads * head_dim] elements; a slab with
// hidden states (Elastic-Cache) also holds every layer's input hidden state per position,
// [num_layers][positions][hidden_size], after the K/V planes padded to a whole hidden row
// (so the slab's buffer, read as rows of hidden_size elements, has them at row
// HiddenRowBase(positions) + layer * positions + position).
#ifndef DLLM_ENGINE_KV_KV_LAYOUT_H_
#define DLLM_ENGINE_KV_KV_LAYOUT_H_

#include <cstdint>

namespace dllm {

struct KvLayout {
  int num_layers = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
  int hidden_size = 0;

  // Bytes of K plus V for one position across all layers, in the given element size.
  int64_t BytesPerPosition(int bytes_per_element) const {
    return int64_t{2} * num_layers * num_kv_heads * head_dim * bytes_per_element;
  }
  // The first hidden-state row (hidden_size elements per row) of a slab of `positions`.
  int64_t HiddenRowBase(int positions) const {
    const int64_t kv_elements = int64_t{2} * num_layers * positions * num_kv_heads * head_dim;
    return (kv_elements + hidden_size - 1) / hidden_size;
  }
  // Elements of a slab of `positions`, with or without hidden states.
  int64_t SlabElements(int positions, bool hidden_states) const {
    if (!hidden_states) return int64_t{2} * num_layers * positions * num_kv_heads * head_dim;
    return (HiddenRowBase(positions) + int64_t{num_layers} * positions) * hidden_size;
  }
};

}  // namespace dllm

#endif  // DLLM_ENGINE_KV_KV_LAYOUT_H_
