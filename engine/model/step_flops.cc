#include "engine/model/step_flops.h"

namespace dllm {

double LayerMatmulParams(const ModelConfig& c) {
  const double h = c.hidden_size;
  const double q = static_cast<double>(c.num_heads) * c.head_dim;
  const double kv = static_cast<double>(c.num_kv_heads) * c.head_dim;
  const double f = c.intermediate_size;
  return h * q + 2 * h * kv + q * h + 3 * h * f;
}

double StepFlops(const ModelConfig& c, double rows, double kv_positions, double predicted) {
  const double q = static_cast<double>(c.num_heads) * c.head_dim;
  const double per_row_layer = 2.0 * LayerMatmulParams(c) + 4.0 * kv_positions * q;
  return per_row_layer * rows * c.num_layers +
         2.0 * static_cast<double>(c.hidden_size) * c.vocab_size * predicted;
}

}  // namespace dllm
