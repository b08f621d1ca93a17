// AttentionMaps: head-averaged attention probabilities of one sequence's query rows, per
// layer, for the cache policies that decide from attention (d2Cache's rollout).
//
// The forward pass never materializes attention on its step path; it computes these only for
// a sequence whose SequenceStep asks for them, as extra work that the policy's decision cost
// is charged with (`seconds`).
#ifndef DLLM_ENGINE_CORE_ATTENTION_MAPS_H_
#define DLLM_ENGINE_CORE_ATTENTION_MAPS_H_

#include <cstdint>
#include <span>
#include <vector>

namespace dllm {

struct AttentionMaps {
  int layers = 0;
  int rows = 0;       // the step's query rows, in ascending position order
  int positions = 0;  // keys: every canvas position [0, positions)
  // [layers][rows][positions]: mean over heads of softmax(scale * q . K^T); each row sums
  // to 1 (up to rounding).
  std::vector<float> probs;
  double seconds = 0;  // time the forward spent computing them

  void Reset(int num_layers, int num_rows, int num_positions) {
    layers = num_layers;
    rows = num_rows;
    positions = num_positions;
    probs.assign(static_cast<size_t>(num_layers) * num_rows * num_positions, 0.0f);
    seconds = 0;
  }
  bool empty() const { return probs.empty(); }
  std::span<const float> Row(int layer, int row) const {
    return std::span<const float>(probs).subspan(
        (static_cast<size_t>(layer) * rows + row) * positions, positions);
  }
  std::span<float> Layer(int layer) {
    return std::span<float>(probs).subspan(static_cast<size_t>(layer) * rows * positions,
                                           static_cast<size_t>(rows) * positions);
  }
};

}  // namespace dllm

#endif  // DLLM_ENGINE_CORE_ATTENTION_MAPS_H_
