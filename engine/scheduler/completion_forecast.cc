#include "engine/scheduler/completion_forecast.h"

#include <algorithm>
#include <functional>
#include <numeric>
#include <vector>

namespace dllm {
namespace {

// Weight of a new step time: steps alternate between full and partial, so step time is
// averaged over ~20 steps.
constexpr double kStepWeight = 0.05;
// Steps per mask of the most recent finished sequences kept.
constexpr size_t kRecentFinished = 64;

void Average(std::optional<double>& mean, double value, double weight) {
  mean = mean.has_value() ? *mean + weight * (value - *mean) : value;
}

}  // namespace

CompletionForecast::CompletionForecast(int batch_slots) : batch_slots_(std::max(1, batch_slots)) {}

void CompletionForecast::ObserveStep(double seconds, int sequences) {
  if (sequences < 1 || !(seconds >= 0)) return;
  Average(step_seconds_, seconds, kStepWeight);
}

void CompletionForecast::ObserveFinished(int masks, int steps) {
  if (masks < 1 || steps < 1) return;
  const double ratio = static_cast<double>(steps) / masks;
  if (recent_.size() < kRecentFinished) {
    recent_.push_back(ratio);
  } else {
    recent_[next_recent_] = ratio;
  }
  next_recent_ = (next_recent_ + 1) % kRecentFinished;
}

std::optional<double> CompletionForecast::Steps(int masks, int steps_cap) const {
  if (recent_.empty()) return std::nullopt;
  const double per_mask = std::accumulate(recent_.begin(), recent_.end(), 0.0) / recent_.size();
  // At least one step per request with a mask left, whatever the data say.
  double steps = masks > 0 ? std::max(1.0, masks * per_mask) : 0.0;
  if (steps_cap > 0) steps = std::min(steps, static_cast<double>(steps_cap));
  return steps;
}

std::optional<CompletionForecast::Times> CompletionForecast::Forecast(
    std::span<const double> running_steps, std::span<const double> queued_steps,
    double own_steps) const {
  if (!step_seconds_.has_value()) return std::nullopt;
  // Min-heap of the step at which each slot frees; free slots free at 0.
  std::vector<double> frees(running_steps.begin(), running_steps.end());
  frees.resize(std::max<size_t>(frees.size(), static_cast<size_t>(batch_slots_)), 0.0);
  const auto later = std::greater<double>();
  std::make_heap(frees.begin(), frees.end(), later);
  auto take_slot = [&] {
    std::pop_heap(frees.begin(), frees.end(), later);
    const double at = frees.back();
    frees.pop_back();
    return at;
  };
  for (double steps : queued_steps) {
    frees.push_back(take_slot() + steps);
    std::push_heap(frees.begin(), frees.end(), later);
  }
  const double start = take_slot();
  return Times{start * *step_seconds_, (start + own_steps) * *step_seconds_};
}

double CompletionForecast::BacklogSeconds(double ahead_steps) const {
  return step_seconds_.has_value() ? ahead_steps / batch_slots_ * *step_seconds_ : 0.0;
}

bool TauSwitchDue(double seconds_to_deadline, double steps_left, double step_seconds,
                  double slack_ratio) {
  return slack_ratio > 0 && seconds_to_deadline < slack_ratio * steps_left * step_seconds;
}

}  // namespace dllm
