#include "engine/scheduler/shadow/shadow_steps.h"

#include <chrono>
#include <optional>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "engine/backend/counter_rng.h"
#include "engine/decoding/cache_policy.h"
#include "engine/scheduler/shadow/shadow_measure.h"

namespace dllm {
namespace {

// Domain word of the shadow draws (ASCII "shdw"), apart from the sampling draws.
constexpr uint32_t kRngDomainShadow = 0x73686477u;

// Whether the planned step of `seq` is a partial step drawn for a shadow at `engine_rate` (or
// the request's cache.shadow_sample_rate): a pure function of (request id, step).
bool Drawn(const Sequence& seq, float engine_rate) {
  if (seq.planned_full() || seq.finished_decoding()) return false;
  // An elastic step may be run again from a deep layer; a shadow would measure its first pass.
  if (NeedsHiddenStates(seq.request().cache)) return false;
  const float rate = seq.request().cache.shadow_sample_rate.value_or(engine_rate);
  if (!(rate > 0.0f)) return false;
  if (rate >= 1.0f) return true;
  const uint64_t key = seq.id();
  const Philox4x32 bits =
      Philox4x32_10(Philox4x32{{0u, static_cast<uint32_t>(seq.step()), 0u, kRngDomainShadow}},
                    static_cast<uint32_t>(key), static_cast<uint32_t>(key >> 32));
  return UniformFromBits(bits.v[0]) < rate;
}

// Measures the shadow of `seq`'s planned step `step` (before the commit): `partial_rows` and
// `partial_logits` are the step's own rows, `shadow` the full forward's.
absl::StatusOr<ShadowSample> Measure(const Sequence& seq, const SequenceStep& step,
                                     std::span<const RowStats> partial_rows,
                                     std::span<const std::vector<float>> partial_logits,
                                     const StepExecutor::ShadowResult& shadow) {
  const size_t n = step.predict_positions.size();
  if (partial_rows.size() != n || partial_logits.size() != n || shadow.rows.size() != n ||
      shadow.logits.size() != n) {
    return absl::InternalError("shadow step: row counts do not match the plan");
  }
  absl::StatusOr<std::vector<CommittedToken>> partial = seq.DryCommit(partial_rows);
  if (!partial.ok()) return partial.status();
  absl::StatusOr<std::vector<CommittedToken>> full = seq.DryCommit(shadow.rows);
  if (!full.ok()) return full.status();
  const int length = seq.canvas_length();
  std::vector<uint8_t> decided(static_cast<size_t>(length));
  for (int p = 0; p < length; ++p) decided[p] = seq.decided(p) ? 1 : 0;
  const std::vector<int8_t> regions =
      ShadowRegions(length, seq.prompt_length(), decided, step.query_positions);
  ShadowSample sample;
  sample.request_id = seq.request().id;
  sample.step = seq.step();
  sample.entropy = seq.last_step_entropy();
  ShadowInputs in;
  in.predict_positions = step.predict_positions;
  in.partial_logits = partial_logits;
  in.full_logits = shadow.logits;
  in.partial_commit = *partial;
  in.full_commit = *full;
  in.full_rows = shadow.rows;
  in.regions = regions;
  in.kv = &shadow.kv;
  MeasureShadow(in, &sample);
  return sample;
}

// The switched steps' controller: the same budget, but it never loosens the τ under load
// past what the request asked for.
TauAutotuneOptions UnderLoad(TauAutotuneOptions options) {
  options.max_scale = 1;
  return options;
}

}  // namespace

ShadowSteps::ShadowSteps(const ShadowOptions& options, EngineObserver* observer,
                         StepExecutor* executor)
    : sample_rate_(options.sample_rate),
      observer_(observer),
      executor_(executor),
      tau_(options.tau_autotune),
      load_tau_(UnderLoad(options.tau_autotune)),
      budget_(options.max_time_fraction) {}

int ShadowSteps::Pick(std::span<const std::unique_ptr<Sequence>> sequences,
                      absl::FunctionRef<bool()> requests_waiting) {
  if (observer_ == nullptr || sequences.empty() || !budget_.allows()) return -1;
  // Shadows are a luxury of idle capacity: while someone waits for admission, only the
  // switched sequences', which the switch's quality budget needs. Asked once, and only when
  // a draw would run.
  std::optional<bool> waiting;
  const size_t n = sequences.size();
  const size_t start = static_cast<size_t>(steps_ % n);
  for (size_t k = 0; k < n; ++k) {
    const size_t i = (start + k) % n;
    const Sequence& seq = *sequences[i];
    if (!Drawn(seq, sample_rate_)) continue;
    if (seq.tau_switched()) return static_cast<int>(i);
    if (!waiting.has_value()) waiting = requests_waiting();
    if (!*waiting) return static_cast<int>(i);
  }
  return -1;
}

absl::Status ShadowSteps::Forward(const StepBatch& batch, std::span<KvHandle* const> kv,
                                  std::span<const std::unique_ptr<Sequence>> sequences,
                                  absl::FunctionRef<bool()> requests_waiting, StepResult* result) {
  shadow_seconds_ = 0;
  int shadow = Pick(sequences, requests_waiting);
  ++steps_;
  std::vector<std::vector<float>> partial_logits;
  absl::Status status;
  if (shadow >= 0) {
    status = executor_->RunCapturingLogits(batch, kv, shadow, result, &partial_logits);
    if (absl::IsUnimplemented(status)) {
      shadow = -1;
      status = executor_->Run(batch, kv, result);
    }
  } else {
    status = executor_->Run(batch, kv, result);
  }
  // Checked here because the shadow below indexes the results.
  if (status.ok() && result->size() != sequences.size()) {
    status = absl::InternalError(absl::StrCat("forward returned ", result->size(), " results for ",
                                              sequences.size(), " sequences"));
  }
  // The shadow runs before the caller commits, while the canvas is the one the step saw.
  if (status.ok() && shadow >= 0) {
    RunShadow(batch, kv, *sequences[shadow], shadow, *result, partial_logits);
  }
  return status;
}

void ShadowSteps::RunShadow(const StepBatch& batch, std::span<KvHandle* const> kv,
                            const Sequence& sequence, int shadow, const StepResult& result,
                            std::span<const std::vector<float>> partial_logits) {
  std::optional<ShadowSample> sample;
  const auto shadow_start = std::chrono::steady_clock::now();
  absl::StatusOr<StepExecutor::ShadowResult> full =
      executor_->RunShadow(batch.sequences[shadow], kv[shadow]);
  if (full.ok()) {
    absl::StatusOr<ShadowSample> measured =
        Measure(sequence, batch.sequences[shadow], result[shadow], partial_logits, *full);
    if (measured.ok()) sample = std::move(*measured);
  }
  shadow_seconds_ =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - shadow_start).count();
  if (sample.has_value()) {
    TauController& controller = sequence.tau_switched() ? load_tau_ : tau_;
    controller.Observe(sample->token_mismatch);
    sample->under_load = sequence.tau_switched();
    sample->tau_scale = controller.scale();
    sample->seconds = shadow_seconds_;
    // Reported before the commits, so that it precedes the request's final event.
    if (observer_ != nullptr) observer_->OnShadowSample(*sample);
  }
}

double ShadowSteps::EndStep(double elapsed_seconds) {
  const double step_seconds = elapsed_seconds - shadow_seconds_;
  budget_.Record(step_seconds, shadow_seconds_);
  return step_seconds;
}

}  // namespace dllm
