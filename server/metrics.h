// Prometheus metrics of dllm-serve (names are a contract with deploy/ dashboards and alerts;
// do not rename). Implemented as the engine's EngineObserver plus server-side counters.
//
//   dllm_requests_total{status,protocol}   counter: finished generation calls by gRPC code
//                                          name (OK, CANCELLED, INVALID_ARGUMENT, ...) and
//                                          transport (protocol="grpc" | "http"; HTTP errors
//                                          are counted under the gRPC name of their status)
//   dllm_request_duration_seconds          histogram: submission to final event (accepted requests)
//   dllm_queue_wait_seconds                histogram: submission to admission
//   dllm_time_to_first_commit_seconds      histogram: submission to first committed token
//   dllm_step_duration_seconds{kind}       histogram, one observation per engine step:
//                                          kind="partial" only if every sequence in the step
//                                          was partial, else kind="full"
//   dllm_denoise_steps_total               counter: sequence-steps (a step of B sequences adds B)
//   dllm_full_refresh_steps_total          counter: sequence-steps that were full refreshes
//   dllm_partial_steps_total               counter: sequence-steps that were partial
//   dllm_canvas_positions_total            counter: canvas positions predicted (per
//                                          sequence-step, the masked positions it denoised)
//   dllm_committed_tokens_total            counter: tokens committed (end tokens included)
//   dllm_committed_tokens_per_step         histogram: tokens one sequence-step committed
//     (vLLM's diffusion reading of its speculative-decoding counters: a denoising step is a
//     draft, canvas positions are draft tokens, committed tokens are accepted tokens; see
//     docs/operations.md)
//   dllm_cache_refresh_ratio               gauge: full / all over the last 256 sequence-steps
//   dllm_decoded_token_entropy             histogram: entropy (nats) of each committed token
//   dllm_rows_per_step                     histogram: query rows computed per step
//   dllm_batch_size                        histogram: sequences per step
//   dllm_num_requests_running              gauge: sequences in the running batch
//   dllm_num_requests_waiting              gauge: requests queued, not yet admitted
//   dllm_kv_cache_usage_ratio              gauge: KV bytes in use / budget, 0..1
//   dllm_generated_tokens_total            counter: answer tokens (before the first end token)
//   dllm_prompt_tokens_total               counter: prompt tokens of finished requests
//   dllm_requests_tau_switched_total       counter: finished requests that switched to their
//                                          tau under load (SLO-aware tau, worker.h)
//   dllm_decision_overhead_seconds_total   counter: time in cache-policy decisions
//   dllm_step_seconds_total                counter: wall time of all engine steps
//   dllm_build_info{version,backend,model} gauge: 1 once the model is loaded (version is
//                                          `git describe` at configure time)
// Cache quality, from sampled shadow full steps (cache.shadow_sample_rate; see
// ShadowSample in engine/shadow_sampling.h):
//   dllm_cache_shadow_samples_total        counter: partial steps checked by a shadow forward
//   dllm_cache_shadow_decision_mismatch_total  counter: samples whose commits would differ
//   dllm_cache_shadow_token_mismatch_total counter: samples committing a token the full step
//                                          would not propose there (the τ autotuner's signal)
//   dllm_cache_shadow_kl                   histogram: mean KL(full || partial), nats, per sample
//   dllm_cache_shadow_max_prob_change      histogram: max |p_partial - p_full| of a committed
//                                          token, per sample
//   dllm_cache_shadow_kv_drift{region,layers}  histogram: relative L2 drift of cached K/V;
//                                          region prompt|decoded_old|masks_outside|recomputed,
//                                          layers all|first|middle|last (thirds)
//   dllm_cache_shadow_seconds_total        counter: time spent in shadow forwards
//   dllm_cache_tau_scale                   gauge: factor on every EntropyCache tau (1 unless
//                                          cache.autotune is on; set at each shadow sample)
//   dllm_cache_shadow_samples_under_load_total         counter: the samples of steps switched
//   dllm_cache_shadow_token_mismatch_under_load_total  to a tau under load, and their token
//                                          mismatches (subsets of the two above)
//   dllm_cache_load_tau_scale              gauge: factor on the tau under load, at most 1
//                                          (cache.autotune's budget on switched steps)
// plus the process_* series of ProcessMetrics (server/process_metrics.h) on the /metrics endpoint
// (server/http/metrics_endpoint.h).
//
// Thread-safety: observer methods run on the engine worker, CountRequest on gRPC threads;
// all are safe concurrently and never block for long (prometheus-cpp metrics are atomic or
// briefly locked).
#ifndef DLLM_SERVER_METRICS_H_
#define DLLM_SERVER_METRICS_H_

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <array>
#include <memory>
#include <string>

#include "absl/synchronization/mutex.h"
#include "engine/engine.h"

namespace dllm {

class ServerMetrics : public EngineObserver {
 public:
  static constexpr int kRefreshWindow = 256;  // sequence-steps in dllm_cache_refresh_ratio

  ServerMetrics();

  const std::shared_ptr<prometheus::Registry>& registry() const { return registry_; }

  // Counts one finished generation call under its gRPC code name and its transport
  // ("grpc" or "http").
  void CountRequest(const std::string& status_code_name, const std::string& protocol = "grpc");
  // Sets dllm_build_info{version,backend,model} = 1 (call once, after the model loaded).
  void SetBuildInfo(const std::string& version, const std::string& backend,
                    const std::string& model);

  void OnStep(const StepInfo& info) override;
  void OnQueue(const QueueInfo& info) override;
  void OnRequestDone(const GenerationRequest& request, const FinalEvent& event) override;
  void OnShadowSample(const ShadowSample& sample) override;

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Counter>& requests_;
  prometheus::Family<prometheus::Gauge>& build_info_;
  prometheus::Histogram& request_duration_;
  prometheus::Histogram& queue_wait_;
  prometheus::Histogram& first_commit_;
  prometheus::Family<prometheus::Histogram>& step_family_;
  prometheus::Histogram& step_full_;
  prometheus::Histogram& step_partial_;
  prometheus::Counter& denoise_steps_;
  prometheus::Counter& full_steps_;
  prometheus::Counter& partial_steps_;
  prometheus::Counter& canvas_positions_;
  prometheus::Counter& committed_tokens_;
  prometheus::Histogram& committed_per_step_;
  prometheus::Gauge& refresh_ratio_;
  prometheus::Histogram& entropy_;
  prometheus::Histogram& rows_per_step_;
  prometheus::Histogram& batch_size_;
  prometheus::Gauge& running_;
  prometheus::Gauge& waiting_;
  prometheus::Gauge& kv_usage_;
  prometheus::Gauge& backlog_;
  prometheus::Counter& generated_tokens_;
  prometheus::Counter& prompt_tokens_;
  prometheus::Counter& tau_switched_;
  prometheus::Counter& decision_seconds_;
  prometheus::Counter& step_seconds_;
  prometheus::Counter& shadow_samples_;
  prometheus::Gauge& tau_scale_;
  prometheus::Counter& shadow_samples_under_load_;
  prometheus::Counter& shadow_token_mismatches_under_load_;
  prometheus::Gauge& load_tau_scale_;
  prometheus::Counter& shadow_mismatches_;
  prometheus::Counter& shadow_token_mismatches_;
  prometheus::Counter& shadow_seconds_;
  prometheus::Histogram& shadow_kl_;
  prometheus::Histogram& shadow_prob_change_;
  prometheus::Family<prometheus::Histogram>& shadow_drift_family_;
  // [region][0 = all layers, 1 + layer third]
  prometheus::Histogram* shadow_drift_[kShadowRegions][1 + kShadowLayerGroups] = {};

  // Ring buffer of the last kRefreshWindow sequence-steps (true = full refresh).
  absl::Mutex window_mu_;
  std::array<bool, kRefreshWindow> window_ ABSL_GUARDED_BY(window_mu_) = {};
  int window_size_ ABSL_GUARDED_BY(window_mu_) = 0;
  int window_next_ ABSL_GUARDED_BY(window_mu_) = 0;
  int window_full_ ABSL_GUARDED_BY(window_mu_) = 0;
};

}  // namespace dllm

#endif  // DLLM_SERVER_METRICS_H_
