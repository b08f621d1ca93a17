#include "server/metrics.h"

namespace dllm {
namespace {

using prometheus::Histogram;

const Histogram::BucketBoundaries kLatencyBuckets = {
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120, 300, 600};
const Histogram::BucketBoundaries kStepBuckets = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
                                                  0.05,   0.1,   0.25,   0.5,   1,    2.5};
const Histogram::BucketBoundaries kEntropyBuckets = {0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 1,
                                                     1.5,   2,    3,    4,   6,    8};
const Histogram::BucketBoundaries kRowsBuckets = {
    1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536};
const Histogram::BucketBoundaries kKlBuckets = {1e-6, 1e-5, 1e-4, 1e-3, 0.003, 0.01,
                                                0.03, 0.1,  0.3,  1,    3};
const Histogram::BucketBoundaries kDriftBuckets = {0.001, 0.003, 0.01, 0.03, 0.1, 0.2,
                                                   0.3,   0.5,   0.75, 1,    2};
const Histogram::BucketBoundaries kProbChangeBuckets = {0.001, 0.005, 0.01, 0.02, 0.05,
                                                        0.1,   0.2,   0.3,  0.5,  1};
const Histogram::BucketBoundaries kBatchBuckets = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512};
// Tokens one sequence-step commits: 0 (a step that committed nothing), 1 (vanilla), a few
// (threshold decoding: ~3-4 on the cot models), up to a whole block.
const Histogram::BucketBoundaries kCommittedBuckets = {0, 1, 2, 3, 4, 6, 8, 12, 16, 32, 64};

prometheus::Histogram& MakeHistogram(prometheus::Registry& r, const std::string& name,
                                     const std::string& help,
                                     const Histogram::BucketBoundaries& buckets) {
  return prometheus::BuildHistogram().Name(name).Help(help).Register(r).Add({}, buckets);
}
prometheus::Counter& MakeCounter(prometheus::Registry& r, const std::string& name,
                                 const std::string& help) {
  return prometheus::BuildCounter().Name(name).Help(help).Register(r).Add({});
}
prometheus::Gauge& MakeGauge(prometheus::Registry& r, const std::string& name,
                             const std::string& help) {
  return prometheus::BuildGauge().Name(name).Help(help).Register(r).Add({});
}

}  // namespace

ServerMetrics::ServerMetrics()
    : registry_(std::make_shared<prometheus::Registry>()),
      requests_(prometheus::BuildCounter()
                    .Name("dllm_requests_total")
                    .Help("Finished generation calls by gRPC status code name and protocol")
                    .Register(*registry_)),
      build_info_(prometheus::BuildGauge()
                      .Name("dllm_build_info")
                      .Help("Always 1: the server's version, backend and model as labels")
                      .Register(*registry_)),
      request_duration_(MakeHistogram(*registry_, "dllm_request_duration_seconds",
                                      "Submission to final event of accepted requests",
                                      kLatencyBuckets)),
      queue_wait_(MakeHistogram(*registry_, "dllm_queue_wait_seconds",
                                "Submission to admission into the running batch", kLatencyBuckets)),
      first_commit_(MakeHistogram(*registry_, "dllm_time_to_first_commit_seconds",
                                  "Submission to the first committed token (diffusion TTFT)",
                                  kLatencyBuckets)),
      step_family_(prometheus::BuildHistogram()
                       .Name("dllm_step_duration_seconds")
                       .Help("Engine step wall time; kind=partial only if every sequence in "
                             "the step was partial, else kind=full")
                       .Register(*registry_)),
      step_full_(step_family_.Add({{"kind", "full"}}, kStepBuckets)),
      step_partial_(step_family_.Add({{"kind", "partial"}}, kStepBuckets)),
      denoise_steps_(MakeCounter(*registry_, "dllm_denoise_steps_total",
                                 "Denoising sequence-steps (a step of B sequences adds B)")),
      full_steps_(MakeCounter(*registry_, "dllm_full_refresh_steps_total",
                              "Sequence-steps that recomputed every row")),
      partial_steps_(MakeCounter(*registry_, "dllm_partial_steps_total",
                                 "Sequence-steps that recomputed a subset of rows")),
      canvas_positions_(MakeCounter(*registry_, "dllm_canvas_positions_total",
                                    "Canvas positions predicted by sequence-steps")),
      committed_tokens_(MakeCounter(*registry_, "dllm_committed_tokens_total",
                                    "Tokens committed (end tokens included)")),
      committed_per_step_(MakeHistogram(*registry_, "dllm_committed_tokens_per_step",
                                        "Tokens committed by one sequence-step",
                                        kCommittedBuckets)),
      refresh_ratio_(MakeGauge(*registry_, "dllm_cache_refresh_ratio",
                               "Full refreshes / sequence-steps over the last 256 sequence-steps")),
      entropy_(MakeHistogram(*registry_, "dllm_decoded_token_entropy",
                             "Entropy (nats) of each committed token", kEntropyBuckets)),
      rows_per_step_(MakeHistogram(*registry_, "dllm_rows_per_step",
                                   "Query rows computed per engine step", kRowsBuckets)),
      batch_size_(
          MakeHistogram(*registry_, "dllm_batch_size", "Sequences per engine step", kBatchBuckets)),
      running_(MakeGauge(*registry_, "dllm_num_requests_running", "Requests in the running batch")),
      waiting_(MakeGauge(*registry_, "dllm_num_requests_waiting",
                         "Requests queued and not yet admitted")),
      kv_usage_(MakeGauge(*registry_, "dllm_kv_cache_usage_ratio",
                          "KV cache bytes in use / budget (0..1)")),
      backlog_(MakeGauge(*registry_, "dllm_backlog_seconds",
                         "Forecast seconds to work off the running and queued requests at full "
                         "batch (measured step time and steps per token): the autoscaling "
                         "signal; 0 until measured")),
      generated_tokens_(MakeCounter(*registry_, "dllm_generated_tokens_total",
                                    "Answer tokens generated (before the first end token)")),
      prompt_tokens_(MakeCounter(*registry_, "dllm_prompt_tokens_total",
                                 "Prompt tokens of finished requests")),
      tau_switched_(MakeCounter(*registry_, "dllm_requests_tau_switched_total",
                                "Finished requests that switched to their EntropyCache tau "
                                "under load because their deadline was at risk")),
      decision_seconds_(MakeCounter(*registry_, "dllm_decision_overhead_seconds_total",
                                    "Time spent in cache-policy decisions")),
      step_seconds_(
          MakeCounter(*registry_, "dllm_step_seconds_total", "Wall time of all engine steps")),
      shadow_samples_(MakeCounter(*registry_, "dllm_cache_shadow_samples_total",
                                  "Partial steps checked against a shadow full forward")),
      tau_scale_(MakeGauge(*registry_, "dllm_cache_tau_scale",
                           "Factor on every EntropyCache tau (cache.autotune; 1 when off)")),
      shadow_samples_under_load_(
          MakeCounter(*registry_, "dllm_cache_shadow_samples_under_load_total",
                      "Shadow samples of steps switched to their tau under load")),
      shadow_token_mismatches_under_load_(
          MakeCounter(*registry_, "dllm_cache_shadow_token_mismatch_under_load_total",
                      "Token mismatches among the shadow samples of switched steps")),
      load_tau_scale_(MakeGauge(*registry_, "dllm_cache_load_tau_scale",
                                "Factor (<= 1) on the tau under load of switched requests "
                                "(cache.autotune's budget on their steps; 1 when off)")),
      shadow_mismatches_(
          MakeCounter(*registry_, "dllm_cache_shadow_decision_mismatch_total",
                      "Shadow samples whose committed tokens would differ under a full step")),
      shadow_token_mismatches_(MakeCounter(
          *registry_, "dllm_cache_shadow_token_mismatch_total",
          "Shadow samples committing a token the full step would not propose at its position")),
      shadow_seconds_(MakeCounter(*registry_, "dllm_cache_shadow_seconds_total",
                                  "Time spent in shadow full forwards and their comparison")),
      shadow_kl_(MakeHistogram(*registry_, "dllm_cache_shadow_kl",
                               "Mean KL(full || partial) of the predicted rows, nats, per sample",
                               kKlBuckets)),
      shadow_prob_change_(MakeHistogram(
          *registry_, "dllm_cache_shadow_max_prob_change",
          "Largest |p_partial - p_full| of a committed token, per sample", kProbChangeBuckets)),
      shadow_drift_family_(prometheus::BuildHistogram()
                               .Name("dllm_cache_shadow_kv_drift")
                               .Help("Relative L2 drift of cached K/V against a full forward, "
                                     "by region and layer third, per sample")
                               .Register(*registry_)) {
  for (int region = 0; region < kShadowRegions; ++region) {
    shadow_drift_[region][0] = &shadow_drift_family_.Add(
        {{"region", ShadowRegionName(region)}, {"layers", "all"}}, kDriftBuckets);
    for (int g = 0; g < kShadowLayerGroups; ++g) {
      shadow_drift_[region][1 + g] = &shadow_drift_family_.Add(
          {{"region", ShadowRegionName(region)}, {"layers", ShadowLayerGroupName(g)}},
          kDriftBuckets);
    }
  }
  // Pre-create the common series so that rate() queries see zeros instead of nothing.
  for (const char* code : {"OK", "CANCELLED", "DEADLINE_EXCEEDED", "INVALID_ARGUMENT",
                           "RESOURCE_EXHAUSTED", "UNAVAILABLE", "UNAUTHENTICATED", "INTERNAL"}) {
    for (const char* protocol : {"grpc", "http"}) {
      requests_.Add({{"status", code}, {"protocol", protocol}});
    }
  }
  tau_scale_.Set(1);  // every tau as configured until the autotuner says otherwise
  load_tau_scale_.Set(1);
}

void ServerMetrics::CountRequest(const std::string& status_code_name, const std::string& protocol) {
  requests_.Add({{"status", status_code_name}, {"protocol", protocol}}).Increment();
}

void ServerMetrics::SetBuildInfo(const std::string& version, const std::string& backend,
                                 const std::string& model) {
  build_info_.Add({{"version", version}, {"backend", backend}, {"model", model}}).Set(1);
}

void ServerMetrics::OnStep(const StepInfo& info) {
  const bool all_partial = info.sequences > 0 && info.full_sequences == 0;
  (all_partial ? step_partial_ : step_full_).Observe(info.seconds);
  denoise_steps_.Increment(info.sequences);
  full_steps_.Increment(info.full_sequences);
  partial_steps_.Increment(info.partial_sequences);
  canvas_positions_.Increment(static_cast<double>(info.predicted_positions));
  committed_tokens_.Increment(static_cast<double>(info.committed_entropies.size()));
  for (int n : info.committed_per_sequence) committed_per_step_.Observe(n);
  for (float e : info.committed_entropies) entropy_.Observe(e);
  rows_per_step_.Observe(static_cast<double>(info.rows));
  batch_size_.Observe(info.sequences);
  decision_seconds_.Increment(info.decision_seconds);
  step_seconds_.Increment(info.seconds);

  absl::MutexLock lock(&window_mu_);
  auto push = [this](bool full) ABSL_EXCLUSIVE_LOCKS_REQUIRED(window_mu_) {
    if (window_size_ == kRefreshWindow) {
      window_full_ -= window_[window_next_] ? 1 : 0;
    } else {
      ++window_size_;
    }
    window_[window_next_] = full;
    window_full_ += full ? 1 : 0;
    window_next_ = (window_next_ + 1) % kRefreshWindow;
  };
  // Within one step the order does not matter; only the last kRefreshWindow entries count.
  const int full = std::min(info.full_sequences, kRefreshWindow);
  const int partial = std::min(info.partial_sequences, kRefreshWindow);
  for (int i = 0; i < partial; ++i) push(false);
  for (int i = 0; i < full; ++i) push(true);
  if (window_size_ > 0) refresh_ratio_.Set(static_cast<double>(window_full_) / window_size_);
}

void ServerMetrics::OnQueue(const QueueInfo& info) {
  waiting_.Set(info.waiting);
  running_.Set(info.running);
  kv_usage_.Set(info.kv_usage_ratio);
  backlog_.Set(info.backlog_seconds);
}

void ServerMetrics::OnRequestDone(const GenerationRequest& request, const FinalEvent& event) {
  const SequenceStats& s = event.stats;
  request_duration_.Observe(s.total_seconds);
  queue_wait_.Observe(s.queue_seconds);
  if (s.first_commit_seconds > 0) first_commit_.Observe(s.first_commit_seconds);
  generated_tokens_.Increment(s.generated_tokens);
  prompt_tokens_.Increment(s.prompt_tokens);
  if (s.tau_switch_step >= 0) tau_switched_.Increment();
}

void ServerMetrics::OnShadowSample(const ShadowSample& sample) {
  shadow_samples_.Increment();
  if (sample.under_load) {
    shadow_samples_under_load_.Increment();
    if (sample.token_mismatch) shadow_token_mismatches_under_load_.Increment();
    load_tau_scale_.Set(sample.tau_scale);
  } else {
    tau_scale_.Set(sample.tau_scale);
  }
  if (sample.decision_mismatch) shadow_mismatches_.Increment();
  if (sample.token_mismatch) shadow_token_mismatches_.Increment();
  shadow_seconds_.Increment(sample.seconds);
  shadow_kl_.Observe(sample.kl_mean);
  if (sample.committed > 0) shadow_prob_change_.Observe(sample.max_prob_change);
  // Regions a step did not have (no prompt rows read from the cache, say) are not observed.
  for (int region = 0; region < kShadowRegions; ++region) {
    if (sample.drift[region].positions > 0)
      shadow_drift_[region][0]->Observe(sample.drift[region].kv);
    for (int g = 0; g < kShadowLayerGroups; ++g) {
      const KvDrift& d = sample.drift_by_group[region][g];
      if (d.positions > 0 && d.layers > 0) shadow_drift_[region][1 + g]->Observe(d.kv);
    }
  }
}

}  // namespace dllm
