// PlanCanvas: the PlanInput a cache-policy test plans from. A decided prompt, then an answer
// in blocks whose first block is the current one; the test sets what else is decided and the
// decoder's candidates.
#ifndef DLLM_TESTS_ENGINE_DECODING_PLAN_CANVAS_H_
#define DLLM_TESTS_ENGINE_DECODING_PLAN_CANVAS_H_

#include <cstdint>
#include <vector>

#include "engine/decoding/cache_policy.h"

namespace dllm {

struct PlanCanvas {
  PlanCanvas(int prompt_length, int answer_length, int block_length,
             std::vector<int32_t> candidate_positions)
      : prompt(prompt_length),
        answer(answer_length),
        block(block_length),
        decided(static_cast<size_t>(prompt_length + answer_length), 0),
        candidates(std::move(candidate_positions)) {
    for (int p = 0; p < prompt; ++p) decided[p] = 1;
  }

  PlanInput Input(int step) const {
    PlanInput in;
    in.step = step;
    in.candidates = candidates;
    in.block_begin = prompt;
    in.block_end = prompt + block;
    in.canvas_end = prompt + answer;
    in.answer_end = prompt + answer;
    in.answer_begin = prompt;
    in.block_length = block;
    in.decided = decided;
    return in;
  }

  int prompt;
  int answer;
  int block;
  std::vector<uint8_t> decided;  // per canvas position; the prompt's are set
  std::vector<int32_t> candidates;
};

}  // namespace dllm

#endif  // DLLM_TESTS_ENGINE_DECODING_PLAN_CANVAS_H_
