#include "server/metrics.h"

#include <prometheus/text_serializer.h>

#include <catch2/catch.hpp>
#include <regex>
#include <sstream>

namespace dllm {
namespace {

std::string Scrape(ServerMetrics& m) {
  prometheus::TextSerializer serializer;
  return serializer.Serialize(m.registry()->Collect());
}

// Value of the first sample line that starts with `series` followed by a space.
double Sample(const std::string& text, const std::string& series) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(series + " ", 0) == 0) return std::stod(line.substr(series.size() + 1));
  }
  FAIL("series not found: " << series << "\n" << text);
  return 0;
}

TEST_CASE("metrics: every contracted name is exported") {
  ServerMetrics m;
  const std::string text = Scrape(m);
  for (const char* name : {"dllm_requests_total",
                           "dllm_request_duration_seconds",
                           "dllm_queue_wait_seconds",
                           "dllm_time_to_first_commit_seconds",
                           "dllm_step_duration_seconds",
                           "dllm_denoise_steps_total",
                           "dllm_full_refresh_steps_total",
                           "dllm_partial_steps_total",
                           "dllm_canvas_positions_total",
                           "dllm_committed_tokens_total",
                           "dllm_committed_tokens_per_step",
                           "dllm_cache_refresh_ratio",
                           "dllm_decoded_token_entropy",
                           "dllm_rows_per_step",
                           "dllm_batch_size",
                           "dllm_num_requests_running",
                           "dllm_num_requests_waiting",
                           "dllm_kv_cache_usage_ratio",
                           "dllm_backlog_seconds",
                           "dllm_generated_tokens_total",
                           "dllm_prompt_tokens_total",
                           "dllm_requests_tau_switched_total",
                           "dllm_decision_overhead_seconds_total",
                           "dllm_step_seconds_total",
                           "dllm_cache_shadow_samples_total",
                           "dllm_cache_shadow_decision_mismatch_total",
                           "dllm_cache_shadow_token_mismatch_total",
                           "dllm_cache_shadow_kl",
                           "dllm_cache_shadow_max_prob_change",
                           "dllm_cache_shadow_kv_drift",
                           "dllm_cache_shadow_seconds_total",
                           "dllm_cache_tau_scale",
                           "dllm_cache_shadow_samples_under_load_total",
                           "dllm_cache_shadow_token_mismatch_under_load_total",
                           "dllm_cache_load_tau_scale"}) {
    INFO(name);
    CHECK(text.find(std::string("# TYPE ") + name + " ") != std::string::npos);
  }
  CHECK(Sample(text, "dllm_requests_total{protocol=\"grpc\",status=\"RESOURCE_EXHAUSTED\"}") == 0);
  CHECK(Sample(text, "dllm_cache_tau_scale") == 1);
  CHECK(Sample(text, "dllm_cache_load_tau_scale") == 1);
  CHECK(Sample(text, "dllm_requests_total{protocol=\"http\",status=\"RESOURCE_EXHAUSTED\"}") == 0);
}

TEST_CASE("metrics: steps, gauges and requests are recorded") {
  ServerMetrics m;
  EngineObserver::StepInfo full;
  full.sequences = 3;
  full.full_sequences = 1;
  full.partial_sequences = 2;
  full.rows = 100;
  full.seconds = 0.25;
  full.decision_seconds = 0.01;
  full.committed_entropies = {0.1f, 2.0f};
  full.committed_per_sequence = {2, 0, 0};
  full.predicted_positions = 40;
  m.OnStep(full);
  EngineObserver::StepInfo partial = full;
  partial.full_sequences = 0;
  partial.partial_sequences = 3;
  partial.seconds = 0.5;
  partial.committed_entropies = {};
  partial.committed_per_sequence = {0, 0, 0};
  partial.predicted_positions = 30;
  m.OnStep(partial);
  m.OnQueue({.waiting = 5, .running = 3, .kv_usage_ratio = 0.75, .backlog_seconds = 2.5});
  m.CountRequest("OK");
  m.CountRequest("OK");
  m.CountRequest("UNAUTHENTICATED");
  m.CountRequest("OK", "http");
  GenerationRequest request;
  FinalEvent final_event;
  final_event.stats.prompt_tokens = 7;
  final_event.stats.generated_tokens = 11;
  final_event.stats.total_seconds = 1.5;
  final_event.stats.queue_seconds = 0.1;
  final_event.stats.first_commit_seconds = 0.3;
  final_event.stats.tau_switch_step = 4;
  m.OnRequestDone(request, final_event);
  final_event.stats.tau_switch_step = -1;  // never switched: not counted
  m.OnRequestDone(request, final_event);

  const std::string text = Scrape(m);
  CHECK(Sample(text, "dllm_requests_total{protocol=\"grpc\",status=\"OK\"}") == 2);
  CHECK(Sample(text, "dllm_requests_total{protocol=\"http\",status=\"OK\"}") == 1);
  CHECK(Sample(text, "dllm_requests_total{protocol=\"grpc\",status=\"UNAUTHENTICATED\"}") == 1);
  CHECK(Sample(text, "dllm_requests_total{protocol=\"http\",status=\"UNAUTHENTICATED\"}") == 0);
  CHECK(Sample(text, "dllm_denoise_steps_total") == 6);
  CHECK(Sample(text, "dllm_full_refresh_steps_total") == 1);
  CHECK(Sample(text, "dllm_partial_steps_total") == 5);
  CHECK(Sample(text, "dllm_canvas_positions_total") == 70);
  CHECK(Sample(text, "dllm_committed_tokens_total") == 2);
  CHECK(Sample(text, "dllm_committed_tokens_per_step_count") == 6);
  CHECK(Sample(text, "dllm_committed_tokens_per_step_sum") == 2);
  CHECK(Sample(text, "dllm_committed_tokens_per_step_bucket{le=\"0\"}") == 5);
  CHECK(Sample(text, "dllm_committed_tokens_per_step_bucket{le=\"2\"}") == 6);
  CHECK(Sample(text, "dllm_cache_refresh_ratio") == Approx(1.0 / 6));
  CHECK(Sample(text, "dllm_step_duration_seconds_count{kind=\"full\"}") == 1);
  CHECK(Sample(text, "dllm_step_duration_seconds_sum{kind=\"full\"}") == 0.25);
  CHECK(Sample(text, "dllm_step_duration_seconds_count{kind=\"partial\"}") == 1);
  CHECK(Sample(text, "dllm_step_seconds_total") == 0.75);
  CHECK(Sample(text, "dllm_decision_overhead_seconds_total") == Approx(0.02));
  CHECK(Sample(text, "dllm_decoded_token_entropy_count") == 2);
  CHECK(Sample(text, "dllm_rows_per_step_sum") == 200);
  CHECK(Sample(text, "dllm_batch_size_sum") == 6);
  CHECK(Sample(text, "dllm_num_requests_waiting") == 5);
  CHECK(Sample(text, "dllm_num_requests_running") == 3);
  CHECK(Sample(text, "dllm_kv_cache_usage_ratio") == 0.75);
  CHECK(Sample(text, "dllm_backlog_seconds") == 2.5);
  CHECK(Sample(text, "dllm_prompt_tokens_total") == 14);
  CHECK(Sample(text, "dllm_generated_tokens_total") == 22);
  CHECK(Sample(text, "dllm_requests_tau_switched_total") == 1);
  CHECK(Sample(text, "dllm_request_duration_seconds_sum") == 3.0);
  CHECK(Sample(text, "dllm_time_to_first_commit_seconds_count") == 2);
  CHECK(Sample(text, "dllm_queue_wait_seconds_sum") == Approx(0.2));
}

TEST_CASE("metrics: shadow samples feed the cache-quality series") {
  ServerMetrics m;
  ShadowSample s;
  s.kl_mean = 0.02;
  s.committed = 2;
  s.max_prob_change = 0.15;
  s.decision_mismatch = true;
  s.token_mismatch = false;
  s.seconds = 0.5;
  s.drift[kShadowPrompt] = {5, 3, 0.1, 0.2, 0.15};
  s.drift_by_group[kShadowPrompt][kShadowLast] = {5, 1, 0.3, 0.3, 0.3};
  m.OnShadowSample(s);
  s.decision_mismatch = false;
  s.token_mismatch = true;  // not a possible sample (it implies a decision mismatch): it
                            // tells the two counters apart
  s.kl_mean = 0.5;
  s.tau_scale = 0.8;
  m.OnShadowSample(s);
  const std::string text = Scrape(m);
  CHECK(Sample(text, "dllm_cache_tau_scale") == Approx(0.8));
  CHECK(Sample(text, "dllm_cache_load_tau_scale") == 1);
  CHECK(Sample(text, "dllm_cache_shadow_samples_under_load_total") == 0);
  CHECK(Sample(text, "dllm_cache_shadow_samples_total") == 2);
  CHECK(Sample(text, "dllm_cache_shadow_decision_mismatch_total") == 1);
  CHECK(Sample(text, "dllm_cache_shadow_token_mismatch_total") == 1);
  CHECK(Sample(text, "dllm_cache_shadow_seconds_total") == 1.0);
  CHECK(Sample(text, "dllm_cache_shadow_kl_count") == 2);
  CHECK(Sample(text, "dllm_cache_shadow_kl_sum") == Approx(0.52));
  CHECK(Sample(text, "dllm_cache_shadow_kl_bucket{le=\"0.03\"}") == 1);
  CHECK(Sample(text, "dllm_cache_shadow_max_prob_change_sum") == Approx(0.3));
  CHECK(Sample(text, "dllm_cache_shadow_kv_drift_count{layers=\"all\",region=\"prompt\"}") == 2);
  CHECK(Sample(text, "dllm_cache_shadow_kv_drift_sum{layers=\"all\",region=\"prompt\"}") ==
        Approx(0.3));
  CHECK(Sample(text, "dllm_cache_shadow_kv_drift_sum{layers=\"last\",region=\"prompt\"}") ==
        Approx(0.6));
  // Regions the samples did not have are not observed.
  CHECK(Sample(text, "dllm_cache_shadow_kv_drift_count{layers=\"all\",region=\"decoded_old\"}") ==
        0);
  CHECK(Sample(text, "dllm_cache_shadow_kv_drift_count{layers=\"first\",region=\"prompt\"}") == 0);

  // A sample of a switched step sets the scale under load, not the other, and counts apart.
  s.under_load = true;
  s.tau_scale = 0.5;
  m.OnShadowSample(s);
  const std::string after = Scrape(m);
  CHECK(Sample(after, "dllm_cache_tau_scale") == Approx(0.8));
  CHECK(Sample(after, "dllm_cache_load_tau_scale") == Approx(0.5));
  CHECK(Sample(after, "dllm_cache_shadow_samples_total") == 3);
  CHECK(Sample(after, "dllm_cache_shadow_samples_under_load_total") == 1);
  CHECK(Sample(after, "dllm_cache_shadow_token_mismatch_total") == 2);
  CHECK(Sample(after, "dllm_cache_shadow_token_mismatch_under_load_total") == 1);
}

TEST_CASE("metrics: refresh ratio covers only the last 256 sequence-steps") {
  ServerMetrics m;
  EngineObserver::StepInfo full;
  full.sequences = 1;
  full.full_sequences = 1;
  for (int i = 0; i < 300; ++i) m.OnStep(full);
  CHECK(Sample(Scrape(m), "dllm_cache_refresh_ratio") == 1.0);
  EngineObserver::StepInfo partial;
  partial.sequences = 1;
  partial.partial_sequences = 1;
  for (int i = 0; i < 64; ++i) m.OnStep(partial);
  CHECK(Sample(Scrape(m), "dllm_cache_refresh_ratio") == Approx(192.0 / 256));
  for (int i = 0; i < 256; ++i) m.OnStep(partial);
  CHECK(Sample(Scrape(m), "dllm_cache_refresh_ratio") == 0.0);
}

}  // namespace
}  // namespace dllm
