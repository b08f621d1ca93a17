// FillGenerateResponse: the engine's final event as the gRPC response, checked field by field
// for the statistics a client reads.
#include "server/response_mapping.h"

#include <catch2/catch.hpp>

namespace dllm {
namespace {

TEST_CASE("response mapping: cache statistics, tau_switch_step set only when switched") {
  FinalEvent event;
  event.text = "ab";
  event.token_ids = {7, 8};
  event.reason = FinishReason::kEos;
  event.stats.prompt_tokens = 4;
  event.stats.generated_tokens = 2;
  event.stats.steps = 5;
  event.stats.full_steps = 2;
  event.stats.partial_steps = 3;
  event.stats.rows_computed = 40;
  v1::GenerateResponse never;
  FillGenerateResponse("r", event, &never);
  CHECK(never.request_id() == "r");
  CHECK(never.finish_reason() == v1::FINISH_REASON_EOS);
  CHECK(never.cache_stats().steps() == 5);
  CHECK(never.cache_stats().full_steps() == 2);
  CHECK(never.cache_stats().refresh_ratio() == Approx(0.4));
  CHECK(never.cache_stats().rows_computed() == 40);
  CHECK_FALSE(never.cache_stats().has_tau_switch_step());

  event.stats.tau_switch_step = 0;  // step 0 counts: switched at admission
  v1::GenerateResponse switched;
  FillGenerateResponse("r", event, &switched);
  REQUIRE(switched.cache_stats().has_tau_switch_step());
  CHECK(switched.cache_stats().tau_switch_step() == 0);
}

}  // namespace
}  // namespace dllm
