#include "engine/kv/kv_pool.h"

#include <atomic>
#include <catch2/catch.hpp>
#include <thread>
#include <vector>

#include "engine/backend/backend_factory.h"
#include "engine/model/forward_random_model.h"

namespace dllm {
namespace {

TEST_CASE("kv_pool: a slab with hidden states adds every layer's input rows") {
  auto backend = CreateBackend("cpu", 1);
  REQUIRE(backend.ok());
  // hidden 80, 3 layers, 5 heads, 1 kv head: head_dim 16, kv width 16.
  const ModelConfig config = RandomModelConfig(ModelFamily::kDream, 80, 3, 5, 1, 96, 100, 4096);
  const KvLayout layout = config.kv_layout();
  KvPool pool(backend->get(), layout, int64_t{1} << 30);
  // 10 positions: K/V 3 x 2 x 10 x 16 = 960 elements = 12 hidden rows of 80 exactly; then
  // 3 x 10 hidden rows.
  CHECK(layout.HiddenRowBase(10) == 12);
  CHECK(pool.BytesFor(10, true) == int64_t{12 + 30} * 80 * 4);
  CHECK(pool.BytesFor(10, false) == int64_t{960} * 4);
  // 7 positions: 672 K/V elements round up to 9 whole rows (720).
  CHECK(layout.HiddenRowBase(7) == 9);
  CHECK(pool.BytesFor(7, true) == int64_t{9 + 21} * 80 * 4);
  auto slab = pool.Allocate(7, true);
  REQUIRE(slab.ok());
  CHECK((*slab)->has_hidden_states());
  CHECK((*slab)->buffer().bytes() >= pool.BytesFor(7, true));
  CHECK_FALSE((*pool.Allocate(7))->has_hidden_states());
}

TEST_CASE("kv_pool: host bytes of a sequence are counted against the budget, not allocated") {
  auto backend = CreateBackend("cpu", 1);
  REQUIRE(backend.ok());
  const ModelConfig config = RandomModelConfig(ModelFamily::kDream, 80, 3, 5, 1, 96, 100, 4096);
  const KvLayout layout = config.kv_layout();
  const int64_t kv = int64_t{960} * 4;  // 10 positions (see above)
  KvPool pool(backend->get(), layout, 2 * kv + 1000);
  CHECK(pool.BytesFor(10, false, 1000) == kv + 1000);
  CHECK(pool.Fits(10, false, kv + 1000));
  CHECK_FALSE(pool.Fits(10, false, kv + 1001));
  {
    auto slab = pool.Allocate(10, false, 1000);
    REQUIRE(slab.ok());
    CHECK((*slab)->buffer().bytes() < kv + 1000);  // only the K/V is device memory
    CHECK(pool.used_bytes() == kv + 1000);
    CHECK_FALSE(pool.Fits(10, false, 1));
    CHECK(pool.Fits(10, false, 0));
  }
  CHECK(pool.used_bytes() == 0);
}

TEST_CASE("kv_pool: accounting, exhaustion and leak-free release") {
  auto backend = CreateBackend("cpu", 1);
  REQUIRE(backend.ok());
  const ModelConfig config = RandomModelConfig(ModelFamily::kDream, 64, 3, 4, 2, 96, 100, 4096);
  // 3 layers x 2 (K, V) x 2 kv heads x 16 dims x 4 bytes = 768 bytes per position.
  const int64_t per_position = 768;
  KvPool pool(backend->get(), config.kv_layout(), 100 * per_position);
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

TEST_CASE("kv_pool: concurrent allocations never exceed the budget") {
  auto backend = CreateBackend("cpu", 1);
  REQUIRE(backend.ok());
  const ModelConfig config = RandomModelConfig(ModelFamily::kLlada, 32, 1, 2, 2, 64, 50, 4096);
  KvPool pool(backend->get(), config.kv_layout(),
              10 * config.KvBytesPerPosition(4));  // 3 slabs of 3 fit
  std::vector<std::thread> threads;
  threads.reserve(4);
  // Catch2 assertions are not thread-safe: collect, then check on this thread.
  std::atomic<int> granted{0}, refused{0};
  std::atomic<bool> over_budget{false}, wrong_code{false};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 200; ++i) {
        auto slab = pool.Allocate(3);
        if (slab.ok()) {
          ++granted;
          if (pool.used_bytes() > pool.budget_bytes()) over_budget = true;
        } else {
          if (slab.status().code() != absl::StatusCode::kResourceExhausted) wrong_code = true;
          ++refused;
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  CHECK_FALSE(over_budget);
  CHECK_FALSE(wrong_code);
  CHECK(granted + refused == 800);
  CHECK(granted > 0);
  CHECK(pool.used_bytes() == 0);
}

}  // namespace
}  // namespace dllm
