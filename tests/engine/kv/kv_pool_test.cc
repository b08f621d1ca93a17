#include "engine/kv/kv_pool.h"

#include <catch2/catch.hpp>

#include "engine/backend/backend_factory.h"
#include "engine/model/forward_random_model.h"

namespace dllm {
namespace {

TEST_CASE("kv_pool: accounting, exhaustion and leak-free release") {
  auto backend = CreateBackend("cpu", 1);
  REQUIRE(backend.ok());
  const ModelConfig config = RandomModelConfig(ModelFamily::kDream, 64, 3, 4, 2, 96, 100, 4096);
  // 3 layers x 2 (K, V) x 2 kv heads x 16 dims x 4 bytes = 768 bytes per position.
  const int64_t per_position = 768;
  KvPool pool(backend->get(), config, 100 * per_position);
  CHECK(pool.BytesFor(10) == 10 * per_position);
  CHECK(pool.used_bytes() == 0);
  CHECK(pool.Fits(100));
  CHECK_FALSE(pool.Fits(101));
  {
    auto a = pool.Allocate(60);
    REQUIRE(a.ok());
    CHECK((*a)->capacity_positions() == 60);
    CHECK((*a)->bytes() == 60 * per_position);
    CHECK((*a)->buffer().bytes() >= 60 * per_position);
    CHECK(pool.used_bytes() == 60 * per_position);
    CHECK(pool.usage_ratio() == Approx(0.6));
    CHECK_FALSE(pool.Fits(41));
    auto b = pool.Allocate(41);
    CHECK(b.status().code() == absl::StatusCode::kResourceExhausted);
    CHECK(pool.used_bytes() == 60 * per_position);  // a failed allocation reserves nothing
    auto c = pool.Allocate(40);
    REQUIRE(c.ok());
    CHECK(pool.used_bytes() == 100 * per_position);
    c->reset();
    CHECK(pool.used_bytes() == 60 * per_position);
  }
  CHECK(pool.used_bytes() == 0);
  CHECK(pool.Allocate(0).status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(pool.Allocate(-3).status().code() == absl::StatusCode::kInvalidArgument);
  // Repeated allocate/free cycles leave nothing behind.
  for (int i = 0; i < 50; ++i) {
    auto s = pool.Allocate(1 + i % 100);
    REQUIRE(s.ok());
  }
  CHECK(pool.used_bytes() == 0);
}

}  // namespace
}  // namespace dllm
