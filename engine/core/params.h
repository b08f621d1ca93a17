// Request parameters: how a request decodes (DecodingParams) and caches (CacheParams), with
// the one table of their enums' names that every surface uses (YAML config, HTTP, the client,
// the benches), so a name means the same thing everywhere.
//
// Core value types: the decoding layer reads them, engine/engine.h carries them in a
// GenerationRequest, and server/ maps transports onto them. Validation of their values is
// engine/decoding/params_validation.h (one domain per field).
#ifndef DLLM_ENGINE_CORE_PARAMS_H_
#define DLLM_ENGINE_CORE_PARAMS_H_

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

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
};

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
  float entropy_threshold = 0.5f;  // tau, nats: max committed entropy > tau => next step full
  int recent_k = 32;               // most recently committed tokens recomputed in partial steps
  int refresh_interval = 8;        // kInterval
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

}  // namespace dllm

#endif  // DLLM_ENGINE_CORE_PARAMS_H_
