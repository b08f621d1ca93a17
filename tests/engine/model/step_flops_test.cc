#include "engine/model/step_flops.h"

#include <catch2/catch.hpp>

namespace dllm {
namespace {

// LLaDA-8B's shape, counted by hand: the 4096 x 4096 projections, 12288-wide MLP, 32 layers.
TEST_CASE("step flops: LLaDA-8B's layer and a full 1,024-token step, counted by hand") {
  ModelConfig c;
  c.hidden_size = 4096;
  c.num_heads = 32;
  c.num_kv_heads = 32;
  c.head_dim = 128;
  c.intermediate_size = 12288;
  c.num_layers = 32;
  c.vocab_size = 126464;
  const double layer = 4.0 * 4096 * 4096 + 3.0 * 4096 * 12288;  // Q, K, V, O + gate, up, down
  CHECK(LayerMatmulParams(c) == layer);
  const double attention = 4.0 * 1024 * 4096;  // per row and layer
  CHECK(StepFlops(c, 1024, 1024, 1024) ==
        Approx((2 * layer + attention) * 1024 * 32 + 2.0 * 4096 * 126464 * 1024));
  CHECK(StepFlops(c, 0, 1024, 0) == 0);
}

}  // namespace
}  // namespace dllm
