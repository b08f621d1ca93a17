// Shadow sampling, the public side: the engine's options (ShadowOptions, τ autotuning among
// them) and what each sample reports to EngineObserver::OnShadowSample (ShadowSample).
//
// A shadow checks one sampled partial (cached) step of a sequence against a full forward of
// the same canvas, run into a scratch KV slab: would the step have committed differently
// (decision mismatch), how far its distributions and cached K/V were from fresh ones. Shadows
// are observation only: a request commits exactly what it would without them. With τ
// autotuning on, the mismatch rate of the samples drives a scale on every EntropyCache τ.
// The machinery (drawing, cost budget, measurement, controller) is engine/scheduler/shadow/.
//
// Public API: engine/engine.h includes this header, and engine/check_layering.cmake counts it
// with engine.h as layer "api". Its few functions are defined at engine level in a file of
// their own, shadow_sampling.cc, which needs nothing but this header: the server's config
// parser (and so its fuzzers) validates cache.autotune with ValidateTauAutotuneOptions without
// linking the engine.
//
// Thread-safety: value types and pure functions.
#ifndef DLLM_ENGINE_SHADOW_SAMPLING_H_
#define DLLM_ENGINE_SHADOW_SAMPLING_H_

#include <limits>
#include <string>

#include "absl/status/status.h"

namespace dllm {

// ---------------------------------------------------------------- options

// EntropyCache τ autotuning (engine/scheduler/shadow/tau_controller.h): keeps the shadow
// steps' token-mismatch rate (ShadowSample::token_mismatch) under a budget by scaling every
// request's τ. Needs shadow samples (ShadowOptions::sample_rate > 0).
//
// The same budget holds the steps of requests switched to their τ under load
// (engine/scheduler/worker.h) by a controller of their own, fed only by their samples: its
// scale, at most 1, lowers the τ under load, as far back as the request's own τ
// (TauUnderLoad in engine/decoding/cache_policy.h). The other controller sees only the
// samples of steps at a request's own τ, so a switch under load never loosens the τ of
// requests with slack.
struct TauAutotuneOptions {
  bool enabled = false;
  double mismatch_budget = 0.05;  // ceiling of the token-mismatch rate, in (0, 1)
  int window_samples = 50;        // fewest shadow samples per decision (tau_controller.h)
  double step_factor = 1.25;      // the scale moves by this factor per adjustment, > 1
  double min_scale = 1.0 / 64;    // 0 < min_scale <= 1 <= max_scale
  double max_scale = 64;
};

// INVALID_ARGUMENT "<field>: <reason>" when an option is out of range (checked when enabled
// or not, so a config cannot hide a bad value behind enabled: false), or when autotuning is
// enabled without shadow samples to learn from (`shadow_sample_rate`, the engine's rate).
absl::Status ValidateTauAutotuneOptions(const TauAutotuneOptions& options,
                                        float shadow_sample_rate);

// EngineOptions::shadow.
struct ShadowOptions {
  // Fraction of partial steps checked by a shadow full forward (cache.shadow_sample_rate), in
  // [0, 1]; 0 = off. A request's CacheParams::shadow_sample_rate overrides it for that request.
  // At most one shadow per engine step and only with an EngineOptions::observer to report to.
  // While requests wait in the queue, only the steps of sequences switched to their τ under
  // load are shadowed: their quality is what the budget watches under load, and the time
  // cap below bounds what it costs.
  float sample_rate = 0.0f;
  // Cap on shadow time as a fraction of the engine's own step time (> 0; infinity: none).
  // A drawn shadow is skipped while earlier ones have used up the budget
  // (engine/scheduler/shadow/shadow_budget.h), so the cost is bounded whatever the speed-up.
  double max_time_fraction = std::numeric_limits<double>::infinity();
  TauAutotuneOptions tau_autotune;  // off by default
};

// INVALID_ARGUMENT "<field>: <reason>" (sample_rate, max_time_fraction, tau_autotune.<field>)
// when an option is out of range; Engine::Create prefixes "shadow.".
absl::Status ValidateShadowOptions(const ShadowOptions& options);

// ---------------------------------------------------------------- samples

// Where a canvas position's K/V came from in the shadowed partial step.
enum ShadowRegion {
  kShadowPrompt = 0,    // prompt positions the partial step read from the cache
  kShadowDecodedOld,    // decoded answer tokens older than the recent k (cached)
  kShadowMasksOutside,  // masks outside the denoising window (cached)
  kShadowRecomputed,    // rows the partial step recomputed (window masks + recent k)
  kShadowRegions,
};
// Thirds of the model's layers, min(2, layer * 3 / layers).
enum ShadowLayerGroup { kShadowFirst = 0, kShadowMiddle, kShadowLast, kShadowLayerGroups };

// Relative L2 drift ||cached - fresh|| / ||fresh|| of the K (and V) entries of a set of
// positions and layers, after the partial step wrote its rows. `positions` == 0 or
// `layers` == 0: no data (drifts 0).
struct KvDrift {
  int positions = 0;
  int layers = 0;
  double k = 0;
  double v = 0;
  double kv = 0;  // K and V entries together
};

// One sampled partial step checked against a shadow full forward of the same canvas. The
// shadow writes a scratch KV slab, never the sequence's, and its time is in `seconds` only,
// not in EngineObserver::StepInfo::seconds.
struct ShadowSample {
  std::string request_id;  // GenerationRequest::id
  int step = 0;            // the sequence's denoising step that was shadowed
  // E that allowed this partial step: max entropy (nats) of the tokens committed by the
  // previous step (0 when it committed none).
  double entropy = 0;
  int predicted_rows = 0;
  double kl_mean = 0;  // mean over predicted rows of KL(full || partial), nats
  double kl_max = 0;
  // Whether the tokens (positions and ids) the step commits would differ had it been full.
  bool decision_mismatch = false;
  // Whether some token the step commits is not the token the full step's rows propose at its
  // position (RowStats::token): the text would differ, not only which positions land in this
  // step. Under threshold decoding a partial step that moves a probability from 0.91 to 0.89
  // is a decision mismatch (the token lands a step later) but not a token mismatch. On the
  // cot models 18-26% of partial steps are decision mismatches at every tau from 0.17 to 1
  // (docs/benchmarks.md), a floor no tau moves, so the tau autotuner steers by this one.
  bool token_mismatch = false;
  int committed = 0;  // tokens the (partial) step commits
  // max over committed tokens of |p_partial(token) - p_full(token)| at its position.
  double max_prob_change = 0;
  KvDrift drift[kShadowRegions];                               // all layers
  KvDrift drift_by_group[kShadowRegions][kShadowLayerGroups];  // first/middle/last third
  double seconds = 0;  // the shadow forward plus the comparison
  // The shadowed step was planned at the request's τ under load (its request had switched).
  bool under_load = false;
  // The τ scale in effect after this sample (TauAutotuneOptions; 1 when autotuning is off):
  // of the controller it fed, the one of switched steps when `under_load`.
  double tau_scale = 1;
};

// Metric label of a shadow region: "prompt", "decoded_old", "masks_outside", "recomputed".
const char* ShadowRegionName(int region);
// "first", "middle", "last".
const char* ShadowLayerGroupName(int group);

}  // namespace dllm

#endif  // DLLM_ENGINE_SHADOW_SAMPLING_H_
