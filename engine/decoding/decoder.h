// Decoder: one sequence's canvas and unmasking schedule (which positions to commit).
//
// The canvas is prompt ++ [MASK] * G ++ suffix; answer positions are [P, P + G). The suffix
// (infilling) is fixed like the prompt: decided from the start, never a candidate. Each step the
// decoder names its candidate set (the still-masked positions it may commit now):
//   kBlock    masks of the current block [P + b*B, P + (b+1)*B); blocks left to right.
//             Quota mode (threshold 0): the block runs steps / nb steps committing the LLaDA
//             quota (docs/models.md §2.6). Quota-0 steps only ever come last in a block (the
//             quota is non-increasing), after its last mask is gone; they change nothing in
//             the reference and are skipped here. Threshold mode (Fast-dLLM): the
//             block runs until it has no masks; `steps` is unused.
//   kTimestep all masks; Dream's count schedule (docs/models.md §3.6) or, for kOrigin, a Bernoulli
//             draw per mask with probability 1 - s/t.
//   kWindow   the W leftmost masks. Threshold mode commits like Fast-dLLM inside the window;
//             with threshold 0 it commits ceil(remaining / steps_left) of the best (at least 1,
//             at most the window).
// The forward returns RowStats for exactly the candidate positions; Commit ranks them by the
// remasking score (token_prob for kLowConfidence/kMaskgitPlus, margin for kTopkMargin,
// -entropy for kEntropy, a counter-RNG uniform for kRandom); ties go to the lowest position.
// Threshold mode commits every candidate whose token_prob >= threshold and always at least
// the best-ranked one.
//
// Step cap (DecodingParams::max_denoising_steps = C > 0): step C - 1, if decoding gets that
// far, is a final step whatever the schedule. Its candidates are every mask left, its span
// runs from the first to one past the last of them, it counts as a block start (so block-
// based caches refresh), and it commits every candidate with its proposed token.
//
// A sequence is finished when no answer mask remains, or as soon as an end token is
// committed and every answer position before it is decided: the output is cut at the first
// end token, so later masks cannot change it.
//
// Thread-safety: none; owned by the engine worker.
#ifndef DLLM_ENGINE_DECODING_DECODER_H_
#define DLLM_ENGINE_DECODING_DECODER_H_

#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/core/params.h"
#include "engine/model/step_batch.h"

namespace dllm {

struct DecoderConfig {
  int32_t mask_token_id = -1;
  std::vector<int32_t> end_token_ids;
  DecodingParams params;  // validated; steps == 0 means the generation length
};

struct CommittedToken {
  int32_t position = 0;  // absolute canvas position
  int32_t token = 0;
  float entropy_nats = 0;
  bool end_token = false;  // one of DecoderConfig::end_token_ids
};

class Decoder {
 public:
  // `prompt` and `suffix` must not contain the mask token; gen_length >= 1 (validated by the
  // caller).
  Decoder(DecoderConfig config, std::span<const int32_t> prompt, int gen_length,
          std::span<const int32_t> suffix = {});
  // A seeded answer region: `answer` holds the mask id where a token is to be generated and
  // a fixed token elsewhere (decided from the start, like the prompt); at least one mask.
  // Schedules run over the masks: a block with none is skipped, quotas count masks.
  Decoder(DecoderConfig config, std::span<const int32_t> prompt, std::span<const int32_t> answer,
          std::span<const int32_t> suffix);

  std::span<const int32_t> canvas() const { return canvas_; }
  int prompt_length() const { return prompt_length_; }
  int gen_length() const { return gen_length_; }
  // Index of the next step (0-based); also the step of the RNG key.
  int step() const { return step_; }
  bool finished() const { return finished_; }
  // Answer positions still masked.
  int masks_left() const { return masks_left_; }

  bool decided(int32_t position) const { return decided_[position] != 0; }
  // Per canvas position, nonzero once decided (the prompt's positions are).
  std::span<const uint8_t> decided_flags() const { return decided_; }
  // Ascending masked positions the next step may commit; the positions whose RowStats the
  // next Commit expects. Empty only when finished.
  const std::vector<int32_t>& candidates() const { return candidates_; }
  // kBlock: whether the next step is the first of its block, and the block's span [lo, hi).
  // Other schedules: the span from the first to one past the last candidate; block start on
  // step 0 only.
  bool at_block_start() const { return at_block_start_; }
  int32_t block_begin() const { return block_begin_; }
  int32_t block_end() const { return block_end_; }

  // Applies one step: `rows` holds one RowStats per candidate, in candidate order. Returns
  // the committed tokens in ascending position order. INVALID_ARGUMENT when rows do not
  // match the candidates. Must not be called once finished.
  absl::StatusOr<std::vector<CommittedToken>> Commit(std::span<const RowStats> rows);

  // Leading answer positions that are decided, stopping before the first mask or the first
  // end token. Its tokens never change again.
  int decided_prefix() const { return decided_prefix_; }
  // True once the first end token is known (it lies right after the decided prefix).
  bool end_token_reached() const { return end_reached_; }
  // True once the step cap's final step has committed (see the step cap above); the answer
  // may still end with an end token, which then was committed by that step.
  bool step_limit_reached() const { return step_limit_reached_; }
  // Answer tokens before the first end token (or the first mask while unfinished).
  std::vector<int32_t> DecidedAnswer() const;
  bool IsEndToken(int32_t token) const;

 private:
  // The canvas, decided flags and schedule state of prompt ++ answer ++ suffix.
  void Init(std::span<const int32_t> prompt, std::span<const int32_t> answer,
            std::span<const int32_t> suffix);
  void AdvanceAndPlan();  // updates prefix/finished, moves blocks, computes candidates
  std::vector<int32_t> RankedCandidates(std::span<const RowStats> rows) const;
  int CountForStep(int candidate_count) const;

  DecoderConfig config_;
  std::vector<int32_t> canvas_;
  // Which positions are decided. Tracked apart from the canvas because a model may propose
  // the mask id itself; such a commit is final like any other (the forward still reads it
  // as a mask, as the reference's canvas would).
  std::vector<uint8_t> decided_;
  int prompt_length_ = 0;
  int gen_length_ = 0;
  int steps_ = 0;  // resolved step budget
  int step_ = 0;
  bool finished_ = false;
  int masks_left_ = 0;
  int decided_prefix_ = 0;
  bool end_reached_ = false;
  bool final_by_cap_ = false;  // the planned step is the step cap's final step
  bool step_limit_reached_ = false;
  std::vector<int32_t> candidates_;
  bool at_block_start_ = true;
  int32_t block_begin_ = 0;
  int32_t block_end_ = 0;
  // kBlock
  int block_index_ = 0;
  int step_in_block_ = 0;
  std::vector<int> block_quota_;
  // kTimestep
  std::vector<float> timesteps_;
};

// The remasking score used for ranking (higher is better); kRandom draws from the counter
// RNG keyed by (seed, position, step).
float RemaskingScore(Remasking remasking, const RowStats& row, uint64_t seed, int step);

}  // namespace dllm

#endif  // DLLM_ENGINE_DECODING_DECODER_H_
