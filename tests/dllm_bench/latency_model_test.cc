// bench/latency_model: the piecewise-linear rows curve and the linear terms, against values
// worked out by hand from the H100 profile's published points; bad profiles are refused with
// a message naming the problem.
#include "bench/latency_model.h"

#include <catch2/catch.hpp>
#include <string>

namespace dllm::bench {
namespace {

constexpr const char* kH100Like = R"({"name": "h100", "source": "published",
  "rows_seconds": [[32, 0.0122], [256, 0.0132], [512, 0.0165], [1024, 0.029]]})";

TEST_CASE("latency model: rows curve through its knots", "[sim][latency_model]") {
  absl::StatusOr<LatencyModel> m = LatencyModel::Parse(kH100Like);
  REQUIRE(m.ok());
  CHECK(m->name() == "h100");
  CHECK(m->source() == "published");
  CHECK(m->RowsSeconds(32) == Approx(0.0122));
  CHECK(m->RowsSeconds(512) == Approx(0.0165));
  // Below the first knot: the fixed cost of a forward.
  CHECK(m->RowsSeconds(0) == Approx(0.0122));
  CHECK(m->RowsSeconds(8) == Approx(0.0122));
  // Between knots: 144 rows is halfway from 32 to 256.
  CHECK(m->RowsSeconds(144) == Approx(0.0127));
  // 768 rows: halfway from 512 to 1024.
  CHECK(m->RowsSeconds(768) == Approx(0.02275));
  // Past the last knot: the last segment's slope (0.0125 s per 512 rows) goes on.
  CHECK(m->RowsSeconds(1536) == Approx(0.029 + 0.0125));
}

TEST_CASE("latency model: linear terms add to the curve", "[sim][latency_model]") {
  absl::StatusOr<LatencyModel> m = LatencyModel::Parse(R"({"name": "cpu",
    "rows_seconds": [[0, 0.002], [1000, 0.102]], "key_row_seconds": 1e-8,
    "map_key_row_seconds": 2e-8, "predicted_row_seconds": 1e-5, "sequence_seconds": 0.001})");
  REQUIRE(m.ok());
  StepCost c;
  c.rows = 500;
  c.key_rows = 500 * 400;
  c.map_key_rows = 100 * 400;
  c.predicted_rows = 60;
  c.sequences = 3;
  // 0.052 (rows) + 0.002 (keys) + 0.0008 (maps) + 0.0006 (predicted) + 0.003 (sequences)
  CHECK(m->Seconds(c) == Approx(0.0584));
  // One knot: a constant curve.
  absl::StatusOr<LatencyModel> flat =
      LatencyModel::Parse(R"({"name": "flat", "rows_seconds": [[10, 0.5]]})");
  REQUIRE(flat.ok());
  CHECK(flat->RowsSeconds(0) == 0.5);
  CHECK(flat->RowsSeconds(1e6) == 0.5);
}

TEST_CASE("latency model: bad profiles name the problem", "[sim][latency_model]") {
  const std::pair<std::string, std::string> cases[] = {
      {"{", "not valid JSON"},
      {"[1]", "must be a JSON object"},
      {R"({"rows_seconds": [[1, 1]]})", "\"name\""},
      {R"({"name": "x"})", "\"rows_seconds\" must be a non-empty array"},
      {R"({"name": "x", "rows_seconds": []})", "\"rows_seconds\" must be a non-empty array"},
      {R"({"name": "x", "rows_seconds": [[1, 1, 1]]})", "is not a [rows, seconds] pair"},
      {R"({"name": "x", "rows_seconds": [[2, 1], [1, 2]]})", "rows must ascend"},
      {R"({"name": "x", "rows_seconds": [[1, -1]]})", "must be finite and >= 0"},
      {R"({"name": "x", "rows_seconds": [[1, 1]], "key_row_seconds": -1})",
       "\"key_row_seconds\" must be finite and >= 0"},
      {R"({"name": "x", "rows_seconds": [[1, 1]], "sequence_seconds": "1"})",
       "\"sequence_seconds\" must be a number"},
  };
  for (const auto& [text, message] : cases) {
    INFO(text);
    absl::StatusOr<LatencyModel> m = LatencyModel::Parse(text);
    REQUIRE_FALSE(m.ok());
    CHECK(absl::IsInvalidArgument(m.status()));
    CHECK_THAT(std::string(m.status().message()), Catch::Contains(message));
  }
  absl::StatusOr<LatencyModel> missing = LatencyModel::FromFile("/nonexistent/profile.json");
  CHECK(absl::IsNotFound(missing.status()));
  CHECK_THAT(std::string(missing.status().message()), Catch::Contains("/nonexistent"));
}

}  // namespace
}  // namespace dllm::bench
