#include "engine/decoding/decoder.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <utility>

#include "absl/strings/str_format.h"
#include "engine/backend/counter_rng.h"
#include "engine/decoding/schedules.h"

namespace dllm {
namespace {

// Counter-RNG domain words, distinct from the forward pass's sampling domain.
constexpr uint32_t kDomainRandomRemask = 0x726d736bu;  // "rmsk"
constexpr uint32_t kDomainOrigin = 0x6f72676eu;        // "orgn"
constexpr uint32_t kDomainAlgTemp = 0x61746d70u;       // "atmp"

}  // namespace

float RemaskingScore(Remasking remasking, const RowStats& row, uint64_t seed, int step) {
  switch (remasking) {
    case Remasking::kLowConfidence:
    case Remasking::kMaskgitPlus:
    case Remasking::kOrigin:
      return row.token_prob;
    case Remasking::kTopkMargin:
      return row.margin;
    case Remasking::kEntropy:
      return -row.entropy_nats;
    case Remasking::kRandom:
      return CounterUniform(seed, row.position, step, 0, kDomainRandomRemask);
  }
  return row.token_prob;
}

Decoder::Decoder(DecoderConfig config, std::span<const int32_t> prompt, int gen_length,
                 std::span<const int32_t> suffix)
    : config_(std::move(config)) {
  Init(prompt, std::vector<int32_t>(static_cast<size_t>(gen_length), config_.mask_token_id),
       suffix);
}

Decoder::Decoder(DecoderConfig config, std::span<const int32_t> prompt,
                 std::span<const int32_t> answer, std::span<const int32_t> suffix)
    : config_(std::move(config)) {
  Init(prompt, answer, suffix);
}

void Decoder::Init(std::span<const int32_t> prompt, std::span<const int32_t> answer,
                   std::span<const int32_t> suffix) {
  prompt_length_ = static_cast<int>(prompt.size());
  gen_length_ = static_cast<int>(answer.size());
  masks_left_ = 0;
  canvas_.reserve(prompt.size() + answer.size() + suffix.size());
  canvas_.assign(prompt.begin(), prompt.end());
  canvas_.insert(canvas_.end(), answer.begin(), answer.end());
  canvas_.insert(canvas_.end(), suffix.begin(), suffix.end());
  decided_.assign(canvas_.size(), 1);
  for (int i = 0; i < gen_length_; ++i) {
    if (answer[i] != config_.mask_token_id) continue;
    decided_[prompt_length_ + i] = 0;
    ++masks_left_;
  }
  steps_ = config_.params.steps > 0 ? config_.params.steps : gen_length_;
  if (config_.params.schedule == Schedule::kTimestep) {
    timesteps_ = DreamTimesteps(steps_, config_.params.eps);
  }
  block_index_ = -1;
  AdvanceAndPlan();
}

bool Decoder::IsEndToken(int32_t token) const {
  return std::find(config_.end_token_ids.begin(), config_.end_token_ids.end(), token) !=
         config_.end_token_ids.end();
}

std::vector<int32_t> Decoder::DecidedAnswer() const {
  return std::vector<int32_t>(canvas_.begin() + prompt_length_,
                              canvas_.begin() + prompt_length_ + decided_prefix_);
}

void Decoder::AdvanceAndPlan() {
  while (decided_prefix_ < gen_length_) {
    if (!decided_[prompt_length_ + decided_prefix_]) break;
    const int32_t token = canvas_[prompt_length_ + decided_prefix_];
    if (IsEndToken(token)) {
      end_reached_ = true;
      break;
    }
    ++decided_prefix_;
  }
  finished_ = masks_left_ == 0 || end_reached_;
  candidates_.clear();
  if (finished_) return;

  const int32_t answer_begin = prompt_length_;
  const int32_t answer_end = prompt_length_ + gen_length_;
  auto is_mask = [&](int32_t p) { return !decided_[p]; };

  const int cap = config_.params.max_denoising_steps;
  final_by_cap_ = cap > 0 && step_ >= cap - 1;
  if (final_by_cap_) {
    for (int32_t p = answer_begin; p < answer_end; ++p)
      if (is_mask(p)) candidates_.push_back(p);
    at_block_start_ = true;
    block_begin_ = candidates_.front();
    block_end_ = candidates_.back() + 1;
    return;
  }

  switch (config_.params.schedule) {
    case Schedule::kBlock: {
      const int block_length = config_.params.block_length;
      auto block_has_mask = [&](int b) {
        const int32_t lo = answer_begin + b * block_length;
        const int32_t hi = std::min(answer_end, lo + block_length);
        for (int32_t p = lo; p < hi; ++p)
          if (is_mask(p)) return true;
        return false;
      };
      if (block_index_ < 0 || !block_has_mask(block_index_)) {
        do {
          ++block_index_;
        } while (!block_has_mask(block_index_));
        step_in_block_ = 0;
        block_begin_ = answer_begin + block_index_ * block_length;
        block_end_ = std::min(answer_end, block_begin_ + block_length);
        int masks = 0;
        for (int32_t p = block_begin_; p < block_end_; ++p) masks += is_mask(p) ? 1 : 0;
        const int blocks = gen_length_ / block_length;
        block_quota_ = BlockQuota(masks, std::max(1, steps_ / std::max(1, blocks)));
      }
      at_block_start_ = step_in_block_ == 0;
      for (int32_t p = block_begin_; p < block_end_; ++p)
        if (is_mask(p)) candidates_.push_back(p);
      break;
    }
    case Schedule::kTimestep: {
      for (int32_t p = answer_begin; p < answer_end; ++p)
        if (is_mask(p)) candidates_.push_back(p);
      at_block_start_ = step_ == 0;
      block_begin_ = answer_begin;
      block_end_ = answer_end;
      break;
    }
    case Schedule::kWindow: {
      const int window = config_.params.window;
      for (int32_t p = answer_begin;
           p < answer_end && static_cast<int>(candidates_.size()) < window; ++p)
        if (is_mask(p)) candidates_.push_back(p);
      at_block_start_ = step_ == 0;
      block_begin_ = candidates_.front();
      block_end_ = candidates_.back() + 1;
      break;
    }
  }
}

std::vector<int32_t> Decoder::RankedCandidates(std::span<const RowStats> rows) const {
  const DecodingParams& p = config_.params;
  std::vector<float> score(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    score[i] = RemaskingScore(p.remasking, rows[i], p.seed, step_);
    if (p.schedule == Schedule::kTimestep && EffectiveTemperature(p.alg_temp) > 0) {
      // Sampling k positions without replacement from softmax(score / alg_temp) equals taking
      // the top k of score / alg_temp + Gumbel noise (Gumbel-top-k).
      const float u = CounterUniform(p.seed, rows[i].position, step_, 0, kDomainAlgTemp);
      score[i] = score[i] / p.alg_temp - std::log(-std::log(u));
    }
  }
  std::vector<int32_t> order(rows.size());
  std::iota(order.begin(), order.end(), 0);
  // Candidates are in ascending position order, so a stable sort breaks ties by position.
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t b) { return score[a] > score[b]; });
  return order;
}

int Decoder::CountForStep(int candidate_count) const {
  int count = 1;
  switch (config_.params.schedule) {
    case Schedule::kBlock:
      count = step_in_block_ < static_cast<int>(block_quota_.size())
                  ? block_quota_[step_in_block_]
                  : candidate_count;  // only reachable if the block outlives its quota
      break;
    case Schedule::kTimestep:
      count = DreamTransferCount(timesteps_, std::min(step_, steps_ - 1), masks_left_);
      break;
    case Schedule::kWindow: {
      const int steps_left = std::max(1, steps_ - step_);
      count = std::max(1, (masks_left_ + steps_left - 1) / steps_left);
      break;
    }
  }
  return std::clamp(count, 0, candidate_count);
}

absl::StatusOr<std::vector<CommittedToken>> Decoder::Commit(std::span<const RowStats> rows) {
  if (finished_) return absl::FailedPreconditionError("Commit on a finished sequence");
  if (rows.size() != candidates_.size()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "expected %d RowStats (one per candidate), got %d", candidates_.size(), rows.size()));
  }
  for (size_t i = 0; i < rows.size(); ++i) {
    if (rows[i].position != candidates_[i]) {
      return absl::InvalidArgumentError(
          absl::StrFormat("RowStats %d is for position %d, expected candidate %d", i,
                          rows[i].position, candidates_[i]));
    }
  }
  const DecodingParams& p = config_.params;
  std::vector<int32_t> picks;  // indices into rows
  if (final_by_cap_) {
    picks.resize(rows.size());
    std::iota(picks.begin(), picks.end(), 0);
    step_limit_reached_ = true;
  } else if (p.schedule == Schedule::kTimestep && p.remasking == Remasking::kOrigin) {
    const float fraction = DreamTransferFraction(timesteps_, std::min(step_, steps_ - 1));
    for (size_t i = 0; i < rows.size(); ++i) {
      const float u = CounterUniform(p.seed, rows[i].position, step_, 0, kDomainOrigin);
      if (u < fraction) picks.push_back(static_cast<int32_t>(i));
    }
  } else if (UsesThresholdDecoding(p)) {
    for (size_t i = 0; i < rows.size(); ++i)
      if (rows[i].token_prob >= p.confidence_threshold) picks.push_back(static_cast<int32_t>(i));
    if (picks.empty() && !rows.empty()) picks.push_back(RankedCandidates(rows).front());
  } else {
    const int count = CountForStep(static_cast<int>(rows.size()));
    if (count > 0) {
      std::vector<int32_t> order = RankedCandidates(rows);
      picks.assign(order.begin(), order.begin() + count);
    }
  }
  std::sort(picks.begin(), picks.end());
  std::vector<CommittedToken> committed;
  committed.reserve(picks.size());
  for (int32_t i : picks) {
    const RowStats& row = rows[i];
    canvas_[row.position] = row.token;
    decided_[row.position] = 1;
    --masks_left_;
    committed.push_back(
        CommittedToken{row.position, row.token, row.entropy_nats, IsEndToken(row.token)});
  }
  ++step_;
  ++step_in_block_;
  AdvanceAndPlan();
  return committed;
}

}  // namespace dllm
