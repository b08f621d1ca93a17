#include "engine/decoding/decoder.h"

#include <catch2/catch.hpp>
#include <functional>
#include <numeric>

#include "engine/decoding/schedules.h"

namespace dllm {
namespace {

constexpr int32_t kMask = 99;
constexpr int32_t kEos = 2;

struct Row {
  int32_t token;
  float prob;
  float entropy = 0.5f;
  float margin = 0.1f;
};
using Script = std::function<Row(int32_t position, int step)>;

std::vector<RowStats> RowsFor(const Decoder& d, const Script& script) {
  std::vector<RowStats> rows;
  for (int32_t p : d.candidates()) {
    const Row r = script(p, d.step());
    RowStats s;
    s.position = p;
    s.argmax_token = s.token = r.token;
    s.argmax_prob = s.token_prob = r.prob;
    s.entropy_nats = r.entropy;
    s.margin = r.margin;
    rows.push_back(s);
  }
  return rows;
}

// Runs to completion; returns positions committed per step.
std::vector<std::vector<int32_t>> Run(Decoder& d, const Script& script, int max_steps = 10000) {
  std::vector<std::vector<int32_t>> out;
  while (!d.finished() && max_steps-- > 0) {
    auto committed = d.Commit(RowsFor(d, script));
    REQUIRE(committed.ok());
    std::vector<int32_t> positions;
    for (const auto& c : *committed) positions.push_back(c.position);
    out.push_back(positions);
  }
  REQUIRE(d.finished());
  return out;
}

DecoderConfig Config(DecodingParams p) {
  DecoderConfig c;
  c.mask_token_id = kMask;
  c.end_token_ids = {kEos};
  c.params = p;
  return c;
}

const std::vector<int32_t> kPrompt = {5, 6, 7};

TEST_CASE("Block schedule: quota per step, blocks left to right, lowest confidence last",
          "[decoding][decoder]") {
  DecodingParams p;
  p.schedule = Schedule::kBlock;
  p.block_length = 4;
  p.steps = 6;  // 2 blocks of 4 masks, 3 steps per block -> quota 2,1,1
  Decoder d(Config(p), kPrompt, 8);
  CHECK(d.candidates() == std::vector<int32_t>{3, 4, 5, 6});
  CHECK(d.at_block_start());
  // Confidence decreases with position except position 5 which is the most confident.
  Script script = [](int32_t pos, int) { return Row{10, pos == 5 ? 0.99f : 1.0f - 0.05f * pos}; };
  const auto steps = Run(d, script);
  REQUIRE(steps.size() == 6);
  CHECK(steps[0] == std::vector<int32_t>{3, 5});
  CHECK(steps[1] == std::vector<int32_t>{4});
  CHECK(steps[2] == std::vector<int32_t>{6});
  CHECK(steps[3] == std::vector<int32_t>{7, 8});
  CHECK(steps[4] == std::vector<int32_t>{9});
  CHECK(steps[5] == std::vector<int32_t>{10});
}

TEST_CASE("Block schedule skips the trailing quota-0 steps of a block", "[decoding][decoder]") {
  DecodingParams p;
  p.block_length = 2;
  p.steps = 6;  // 3 steps per block of 2 -> quota 1,1,0; the 0 step would change nothing
  Decoder d(Config(p), kPrompt, 4);
  const auto steps = Run(d, [](int32_t, int) { return Row{10, 0.5f}; });
  REQUIRE(steps.size() == 4);
  CHECK(steps[2] == std::vector<int32_t>{5});
}

TEST_CASE("Ties go to the lowest position", "[decoding][decoder]") {
  DecodingParams p;
  p.block_length = 6;
  p.steps = 3;
  Decoder d(Config(p), kPrompt, 6);
  const auto steps = Run(d, [](int32_t, int) { return Row{10, 1.0f}; });
  CHECK(steps[0] == std::vector<int32_t>{3, 4});
  CHECK(steps[1] == std::vector<int32_t>{5, 6});
  CHECK(steps[2] == std::vector<int32_t>{7, 8});
}

TEST_CASE("Threshold decoding commits all confident candidates, at least the best",
          "[decoding][decoder]") {
  DecodingParams p;
  p.block_length = 4;
  p.confidence_threshold = 0.9f;
  Decoder d(Config(p), kPrompt, 8);
  Script script = [](int32_t pos, int step) {
    if (step == 0) return Row{10, pos == 4 || pos == 6 ? 0.95f : 0.3f};
    return Row{10, pos == 5 ? 0.5f : 0.4f};
  };
  auto c0 = d.Commit(RowsFor(d, script));
  REQUIRE(c0.ok());
  REQUIRE(c0->size() == 2);
  CHECK((*c0)[0].position == 4);
  CHECK((*c0)[1].position == 6);
  CHECK(d.candidates() == std::vector<int32_t>{3, 5});
  auto c1 = d.Commit(RowsFor(d, script));
  REQUIRE(c1->size() == 1);
  CHECK((*c1)[0].position == 5);  // nobody passes: only the best
}

TEST_CASE("Window schedule: the W leftmost masks, threshold inside", "[decoding][decoder]") {
  DecodingParams p;
  p.schedule = Schedule::kWindow;
  p.window = 3;
  p.confidence_threshold = 0.9f;
  Decoder d(Config(p), kPrompt, 8);
  CHECK(d.candidates() == std::vector<int32_t>{3, 4, 5});
  // Position 4 is confident; nothing outside the window is ever committed.
  auto c0 = d.Commit(RowsFor(d, [](int32_t pos, int) { return Row{10, pos == 4 ? 0.95f : 0.1f}; }));
  REQUIRE(c0->size() == 1);
  CHECK((*c0)[0].position == 4);
  CHECK(d.candidates() == std::vector<int32_t>{3, 5, 6});
  CHECK(d.block_begin() == 3);
  CHECK(d.block_end() == 7);
}

TEST_CASE("Timestep schedule commits Dream's count", "[decoding][decoder]") {
  DecodingParams p;
  p.schedule = Schedule::kTimestep;
  p.remasking = Remasking::kEntropy;
  p.steps = 5;
  p.eps = 1e-3f;
  const int gen = 17;
  Decoder d(Config(p), kPrompt, gen);
  const std::vector<float> ts = DreamTimesteps(5, 1e-3f);
  int masks = gen;
  // Higher entropy ranks lower: entropy grows with position, so positions commit in order.
  Script script = [](int32_t pos, int) { return Row{10, 0.5f, 0.01f * pos}; };
  int32_t next = 3;
  for (int i = 0; i < 5; ++i) {
    const int want = DreamTransferCount(ts, i, masks);
    auto c = d.Commit(RowsFor(d, script));
    REQUIRE(c.ok());
    REQUIRE(static_cast<int>(c->size()) == want);
    for (const auto& t : *c) CHECK(t.position == next++);
    masks -= want;
  }
  CHECK(d.finished());
}

TEST_CASE("Finishes early once an end token has a decided prefix", "[decoding][decoder]") {
  DecodingParams p;
  p.block_length = 8;
  p.steps = 8;
  Decoder d(Config(p), kPrompt, 8);
  // Step 0 commits position 5 = EOS (most confident), then 3, then 4.
  Script script = [](int32_t pos, int) {
    if (pos == 5) return Row{kEos, 0.99f};
    return Row{10 + pos, 0.9f - 0.01f * pos};
  };
  const auto steps = Run(d, script);
  CHECK(steps.size() == 3);
  CHECK(d.end_token_reached());
  CHECK(d.DecidedAnswer() == std::vector<int32_t>{13, 14});
}

TEST_CASE("Commits say which tokens are end tokens", "[decoding][decoder]") {
  DecodingParams p;
  p.block_length = 4;
  p.steps = 1;  // one step commits the whole block
  Decoder d(Config(p), kPrompt, 4);
  Script script = [](int32_t pos, int) { return Row{pos >= 5 ? kEos : 10 + pos, 0.9f}; };
  auto committed = d.Commit(RowsFor(d, script));
  REQUIRE(committed.ok());
  REQUIRE(committed->size() == 4);
  for (const CommittedToken& c : *committed) {
    INFO(c.position);
    CHECK(c.end_token == (c.token == kEos));
    CHECK(c.end_token == (c.position >= 5));
  }
}

TEST_CASE("Commit rejects rows that do not match the candidates", "[decoding][decoder]") {
  DecodingParams p;
  p.block_length = 4;
  Decoder d(Config(p), kPrompt, 4);
  std::vector<RowStats> rows = RowsFor(d, [](int32_t, int) { return Row{10, 0.5f}; });
  rows.pop_back();
  CHECK(absl::IsInvalidArgument(d.Commit(rows).status()));
  rows = RowsFor(d, [](int32_t, int) { return Row{10, 0.5f}; });
  rows[0].position = 0;
  CHECK(absl::IsInvalidArgument(d.Commit(rows).status()));
}

TEST_CASE("A proposed mask token is committed as decided", "[decoding][decoder]") {
  DecodingParams p;
  p.block_length = 2;
  Decoder d(Config(p), kPrompt, 2);
  const auto steps = Run(d, [](int32_t, int) { return Row{kMask, 0.5f}; });
  CHECK(steps.size() == 2);
}

TEST_CASE("Random remasking and origin are deterministic per seed", "[decoding][decoder]") {
  for (Remasking r : {Remasking::kRandom, Remasking::kOrigin}) {
    DecodingParams p;
    p.schedule = r == Remasking::kOrigin ? Schedule::kTimestep : Schedule::kBlock;
    p.remasking = r;
    p.block_length = 16;
    p.steps = 8;
    p.seed = 42;
    Decoder a(Config(p), kPrompt, 16), b(Config(p), kPrompt, 16);
    Script script = [](int32_t pos, int) { return Row{10 + pos, 0.5f}; };
    CHECK(Run(a, script) == Run(b, script));
    p.seed = 43;
    Decoder c(Config(p), kPrompt, 16);
    Decoder a2(Config(p), kPrompt, 16);
    CHECK(Run(c, script) == Run(a2, script));
  }
}

// Every schedule, with and without a confidence threshold, capped at 3 steps: the first two
// steps are the uncapped run's, and the third commits every mask left.
TEST_CASE("The step cap ends every schedule with one step that commits every mask left",
          "[decoding][decoder]") {
  struct Case {
    const char* name;
    DecodingParams p;
  };
  std::vector<Case> cases;
  {
    DecodingParams p;
    p.block_length = 4;
    p.steps = 16;
    cases.push_back({"block quota", p});
    p.confidence_threshold = 0.9f;
    cases.push_back({"block threshold", p});
  }
  {
    DecodingParams p;
    p.schedule = Schedule::kWindow;
    p.window = 4;
    cases.push_back({"window quota", p});
    p.confidence_threshold = 0.9f;
    cases.push_back({"window threshold", p});
  }
  {
    DecodingParams p;
    p.schedule = Schedule::kTimestep;
    p.steps = 16;
    cases.push_back({"timestep", p});
    p.remasking = Remasking::kOrigin;
    p.seed = 7;
    cases.push_back({"timestep origin", p});
  }
  // Confidence falls with position; nothing reaches the threshold, so threshold runs commit
  // one token per step.
  Script script = [](int32_t pos, int) { return Row{20 + pos, 0.8f - 0.01f * pos}; };
  for (const Case& c : cases) {
    INFO(c.name);
    Decoder uncapped(Config(c.p), kPrompt, 16);
    const auto free_steps = Run(uncapped, script);
    REQUIRE(free_steps.size() > 3);
    CHECK_FALSE(uncapped.step_limit_reached());

    DecodingParams capped_params = c.p;
    capped_params.max_denoising_steps = 3;
    Decoder capped(Config(capped_params), kPrompt, 16);
    std::vector<std::vector<int32_t>> steps;
    for (int i = 0; i < 2; ++i) {
      auto committed = capped.Commit(RowsFor(capped, script));
      REQUIRE(committed.ok());
      std::vector<int32_t> positions;
      for (const auto& t : *committed) positions.push_back(t.position);
      CHECK(positions == free_steps[i]);
    }
    REQUIRE_FALSE(capped.finished());
    // The final step: every mask left is a candidate, the span covers them, and it is a block
    // start so that block-based caches refresh.
    std::vector<int32_t> left;
    for (int32_t pos = 3; pos < 19; ++pos)
      if (!capped.decided(pos)) left.push_back(pos);
    CHECK(capped.candidates() == left);
    CHECK(capped.at_block_start());
    CHECK(capped.block_begin() == left.front());
    CHECK(capped.block_end() == left.back() + 1);
    auto last = capped.Commit(RowsFor(capped, script));
    REQUIRE(last.ok());
    CHECK(last->size() == left.size());
    CHECK(capped.finished());
    CHECK(capped.step() == 3);
    CHECK(capped.step_limit_reached());
    std::vector<int32_t> want;
    for (int32_t pos = 3; pos < 19; ++pos) want.push_back(20 + pos);
    CHECK(capped.DecidedAnswer() == want);
  }
}

TEST_CASE("A step cap the schedule never reaches changes nothing", "[decoding][decoder]") {
  DecodingParams p;
  p.block_length = 4;
  p.steps = 8;
  Script script = [](int32_t pos, int) { return Row{20 + pos, 0.8f - 0.01f * pos}; };
  Decoder uncapped(Config(p), kPrompt, 16);
  const auto free_steps = Run(uncapped, script);
  REQUIRE(free_steps.size() == 8);
  p.max_denoising_steps = 9;
  Decoder capped(Config(p), kPrompt, 16);
  CHECK(Run(capped, script) == free_steps);
  CHECK_FALSE(capped.step_limit_reached());
}

TEST_CASE("A step cap of one commits the whole answer in the first step", "[decoding][decoder]") {
  DecodingParams p;
  p.block_length = 4;
  p.max_denoising_steps = 1;
  Decoder d(Config(p), kPrompt, 8);
  CHECK(d.candidates().size() == 8);
  const auto steps = Run(d, [](int32_t pos, int) { return Row{pos == 6 ? kEos : 10, 0.5f}; });
  REQUIRE(steps.size() == 1);
  CHECK(d.step_limit_reached());
  CHECK(d.end_token_reached());
  CHECK(d.DecidedAnswer() == std::vector<int32_t>{10, 10, 10});
}

TEST_CASE("A suffix is fixed: never a candidate, never changed", "[decoding][decoder]") {
  for (Schedule schedule : {Schedule::kBlock, Schedule::kTimestep, Schedule::kWindow}) {
    DecodingParams p;
    p.schedule = schedule;
    p.block_length = 4;
    p.window = 3;
    p.steps = 8;
    const std::vector<int32_t> suffix = {40, 41, 42};
    Decoder d(Config(p), kPrompt, 8, suffix);
    REQUIRE(d.canvas().size() == 3 + 8 + 3);
    CHECK(std::vector<int32_t>(d.canvas().end() - 3, d.canvas().end()) == suffix);
    for (int32_t pos = 11; pos < 14; ++pos) CHECK(d.decided(pos));
    const auto steps = Run(d, [](int32_t pos, int) { return Row{20 + pos, 0.9f - 0.01f * pos}; });
    for (const auto& step : steps) {
      for (int32_t pos : step) CHECK(pos < 11);
    }
    CHECK(std::vector<int32_t>(d.canvas().end() - 3, d.canvas().end()) == suffix);
    CHECK(d.DecidedAnswer().size() == 8);
  }
}

TEST_CASE("A seeded canvas: fixed tokens stay, schedules run over the masks",
          "[decoding][decoder]") {
  // Answer of 8: positions 3..10; fixed tokens at answer 0, 1, 2, 3 (the whole first block of
  // 4) and 6.
  std::vector<int32_t> answer(8, kMask);
  for (int i : {0, 1, 2, 3, 6}) answer[i] = 50 + i;
  DecodingParams p;
  p.block_length = 4;
  Decoder block(Config(p), kPrompt, answer, {});
  // The first block has no mask: skipped. The second has 3, committed one per step.
  CHECK(block.candidates() == std::vector<int32_t>{7, 8, 10});
  CHECK(block.decided_prefix() == 4);
  const auto steps = Run(block, [](int32_t pos, int) { return Row{20 + pos, 0.9f - 0.01f * pos}; });
  REQUIRE(steps.size() == 3);
  CHECK(block.DecidedAnswer() == std::vector<int32_t>{50, 51, 52, 53, 27, 28, 56, 30});

  p.schedule = Schedule::kWindow;
  p.window = 2;
  p.confidence_threshold = 0.95f;
  Decoder window(Config(p), kPrompt, answer, {});
  CHECK(window.candidates() == std::vector<int32_t>{7, 8});  // the 2 leftmost masks

  p.schedule = Schedule::kTimestep;
  p.steps = 2;
  Decoder timestep(Config(p), kPrompt, answer, {});
  CHECK(timestep.candidates() == std::vector<int32_t>{7, 8, 10});
  Run(timestep, [](int32_t pos, int) { return Row{20 + pos, 0.5f}; });
  CHECK(timestep.DecidedAnswer() == std::vector<int32_t>{50, 51, 52, 53, 27, 28, 56, 30});

  // A canvas of masks only is the plain decoder.
  DecodingParams q;
  q.block_length = 4;
  Decoder seeded(Config(q), kPrompt, std::vector<int32_t>(8, kMask), {});
  Decoder plain(Config(q), kPrompt, 8);
  Script script = [](int32_t pos, int) { return Row{20 + pos, 0.9f - 0.01f * pos}; };
  CHECK(Run(seeded, script) == Run(plain, script));
}

}  // namespace
}  // namespace dllm
