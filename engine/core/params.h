// Request parameters: how a request decodes (DecodingParams) and caches (CacheParams), with
// the one table of their enums' names that every surface uses (YAML config, HTTP, the client,
// the benches), so a name means the same thing everywhere.
//
// Core value types: the decoding layer reads them, engine/engine.h carries them in a
// GenerationRequest, and server/ maps transports onto them. ValidateParams below is the one
// domain of every field: the engine checks each submitted request with it, and the server
// checks its configured defaults and each request (after applying defaults) with the same
// function under its own limits, so a value means the same thing and gets the same message
// on every path.
#ifndef DLLM_ENGINE_CORE_PARAMS_H_
#define DLLM_ENGINE_CORE_PARAMS_H_

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"

namespace dllm {

// Which positions get unmasked each step.
enum class Schedule {
  kBlock,     // LLaDA semi-autoregressive blocks with a per-block quota (or threshold)
  kTimestep,  // Dream's linspace(1, eps, steps+1) schedule
  kWindow,    // sliding window over the W leftmost masks, confidence threshold inside
};

// How candidates are ranked. kLowConfidence/kRandom are LLaDA's remasking; the rest are
// Dream's `alg` values (kMaskgitPlus ranks by top-1 probability like kLowConfidence).
enum class Remasking { kLowConfidence, kRandom, kOrigin, kMaskgitPlus, kTopkMargin, kEntropy };

struct DecodingParams {
  Schedule schedule = Schedule::kBlock;
  Remasking remasking = Remasking::kLowConfidence;
  int steps = 0;          // total denoising steps for quota schedules; 0 = gen length
  int block_length = 32;  // kBlock
  int window = 32;        // kWindow: masks in the current denoising window
  // > 0: commit every candidate whose confidence >= threshold, at least one per step
  // (Fast-dLLM parallel decoding). Applies to kBlock and kWindow. 0: quota schedule.
  float confidence_threshold = 0.0f;
  float eps = 1e-3f;      // kTimestep
  float alg_temp = 0.0f;  // kTimestep: > 0 samples positions from softmax(conf / alg_temp)
  float temperature = 0.0f;
  int top_k = 0;
  float top_p = 1.0f;
  uint64_t seed = 0;
  // > 0: at most this many denoising steps, whatever the schedule. Step cap - 1 commits every
  // mask still left, each with its proposed token, so the answer is complete at the cap
  // (FinishReason::kStepLimit). 0: no cap.
  int max_denoising_steps = 0;
};

// Whether `p` commits by confidence (threshold decoding) rather than by a quota per step: the
// block and window schedules at confidence_threshold > 0. The decoder's commit rule and the
// request check of quota-only knobs (steps) both ask this.
inline bool UsesThresholdDecoding(const DecodingParams& p) {
  return p.schedule != Schedule::kTimestep && p.confidence_threshold > 0;
}

enum class CachePolicyKind {
  kNone,      // vanilla: full forward every step
  kEntropy,   // EntropyCache
  kDual,      // Fast-dLLM DualCache: full at each block start, current block in between
  kInterval,  // full every refresh_interval steps, EntropyCache's partial step in between
  kPrefix,    // Fast-dLLM PrefixCache: full at each block start, block and suffix in between
  kD2Cache,   // d2Cache: certainty-density masks + last commits + attention-rollout nucleus
  kElastic,   // Elastic-Cache: window + last commits + tracked tokens; deep layers on drift
};

struct CacheParams {
  CachePolicyKind policy = CachePolicyKind::kNone;
  // tau, nats. Any value but NaN: the next step is full when the step's max committed entropy
  // exceeds it, so tau < 0 (e.g. -inf) makes every step full and +inf never refreshes on
  // entropy (HTTP JSON has no infinities; a negative tau is how it asks for "always full").
  float entropy_threshold = 0.5f;
  // The tau (nats) this request's EntropyCache switches to once its deadline is at risk: the
  // worker's forecast of its time left, times EngineOptions::tau_switch_slack_ratio, passes the
  // time to its deadline (engine/scheduler/worker.h). Usually above entropy_threshold: fewer
  // refreshes, fewer rows per step, more capacity under load. Unset: never switches. A request
  // without a deadline never switches. The switch is for the rest of the request.
  std::optional<float> entropy_threshold_under_load;
  int recent_k = 32;  // most recently committed tokens recomputed in partial steps
  // Of those committed before the newest step, only the ones committed with at least this
  // entropy (nats) are recomputed; unset (or 0): all of them (the paper's partial step).
  std::optional<float> recent_min_entropy;
  // Of those committed before the newest step, at most this many end tokens (the newest
  // first) are recomputed; unset: all of them (the paper's partial step). The end tokens that
  // pad the canvas after the answer move least of all tokens (docs/entropy-drift.md).
  std::optional<int> recent_max_end;
  int refresh_interval = 8;  // kInterval
  // kD2Cache, at d2Cache's published defaults: masked rows recomputed per step, the
  // attention-rollout nucleus mass, and the certainty-density Gaussian's width (positions).
  int d2_current_k = 32;
  float d2_rollout_p = 0.1f;
  float d2_sigma = 10.0f;
  // kElastic: below this cosine similarity of a tracked token's attention between steps at
  // layer l, layers l+1.. are recomputed for every row (Elastic-Cache's gamma).
  float elastic_gamma = 0.9f;
  // Per-request override of ShadowOptions::sample_rate, in [0, 1]; unset: the engine's.
  // Shadow steps are an observation only: they never change what the request commits.
  std::optional<float> shadow_sample_rate;
};

// Lower-case names ("block", "low_confidence", "entropy"): the spelling of YAML, HTTP and the
// command lines. Name() of a value outside the enum is "?". Static strings.
const char* Name(Schedule value);
const char* Name(Remasking value);
const char* Name(CachePolicyKind value);

// The value named `name`, or nullopt.
std::optional<Schedule> ParseSchedule(std::string_view name);
std::optional<Remasking> ParseRemasking(std::string_view name);
std::optional<CachePolicyKind> ParseCachePolicy(std::string_view name);

// Every value in declaration order, and their names joined by '|' for error messages
// ("none|entropy|dual|interval|prefix|d2cache|elastic").
inline constexpr std::array kAllSchedules = {Schedule::kBlock, Schedule::kTimestep,
                                             Schedule::kWindow};
inline constexpr std::array kAllRemaskings = {Remasking::kLowConfidence, Remasking::kRandom,
                                              Remasking::kOrigin,        Remasking::kMaskgitPlus,
                                              Remasking::kTopkMargin,    Remasking::kEntropy};
inline constexpr std::array kAllCachePolicies = {
    CachePolicyKind::kNone,     CachePolicyKind::kEntropy, CachePolicyKind::kDual,
    CachePolicyKind::kInterval, CachePolicyKind::kPrefix,  CachePolicyKind::kD2Cache,
    CachePolicyKind::kElastic};
std::string ScheduleNames();
std::string RemaskingNames();
std::string CachePolicyNames();

// Bounds on request parameters beyond their intrinsic domains. The defaults are the engine's
// own guards against absurd requests (not model limits); a server narrows them with its
// operator limits (config `limits:`).
struct ParamLimits {
  int max_new_tokens = 1 << 20;
  int max_steps = 1 << 16;
  int max_block_length = 1 << 20;
  int max_window = 1 << 20;
  float max_temperature = 100.0f;
  float max_shadow_sample_rate = 1.0f;
  int vocab_size = 0;  // > 0: decoding.top_k <= vocab_size
  std::vector<CachePolicyKind> allowed_cache_policies = {kAllCachePolicies.begin(),
                                                         kAllCachePolicies.end()};
  // Config section the bounds come from, for messages: "limits" makes an excess read
  // "decoding.steps: 5000 exceeds limits.max_steps (1024)"; empty: "... is outside [0, 65536]".
  std::string section;
};

// The domain of each field on its own (no rule between fields): ranges, NaN and the
// allowed cache policies. What a server can check of its configured defaults before a model
// says what the unset ones are. INVALID_ARGUMENT "<field>: <reason>", e.g.
// "decoding.top_p: 0 is outside (0, 1]".
absl::Status ValidateParamFields(const DecodingParams& decoding, const CacheParams& cache,
                                 const ParamLimits& limits);

// max_new_tokens in [1, limits.max_new_tokens].
absl::Status ValidateMaxNewTokens(int max_new_tokens, const ParamLimits& limits);

// Every field's domain (ValidateParamFields) and max_new_tokens' (ValidateMaxNewTokens), then the
// rules between fields: decoding.block_length divides max_new_tokens under the block schedule,
// steps are a multiple of the blocks (quota mode), remasking origin needs the timestep schedule,
// the confidence threshold does not apply to it, and the dual and prefix caches need blocks.
absl::Status ValidateParams(int max_new_tokens, const DecodingParams& decoding,
                            const CacheParams& cache, const ParamLimits& limits);

}  // namespace dllm

#endif  // DLLM_ENGINE_CORE_PARAMS_H_
