#include "engine/tokenizer/bpe_model.h"

#include <catch2/catch.hpp>
#include <thread>

namespace dllm {
namespace {

BpeModel::Vocab SmallVocab() {
  return {{"a", 0}, {"b", 1}, {"c", 2}, {"ab", 3}, {"bc", 4}, {"abc", 5}, {"aa", 6}, {"aaa", 7}};
}

std::vector<int32_t> Encode(const BpeModel& model, const std::string& piece) {
  std::vector<int32_t> ids;
  model.Encode(piece, &ids);
  return ids;
}

TEST_CASE("BPE applies merges by rank", "[tokenizer]") {
  using V = std::vector<int32_t>;
  {
    auto model = BpeModel::Create(SmallVocab(), {{"a", "b"}, {"b", "c"}, {"ab", "c"}}, false);
    REQUIRE(model.ok());
    CHECK(Encode(**model, "abc") == V{5});  // a+b first, then ab+c
    CHECK(Encode(**model, "cab") == V{2, 3});
  }
  {
    auto model = BpeModel::Create(SmallVocab(), {{"b", "c"}, {"a", "b"}}, false);
    REQUIRE(model.ok());
    CHECK(Encode(**model, "abc") == V{0, 4});  // b+c wins, and there is no a+bc merge
  }
  {
    // Ties go to the leftmost pair: "aaa" → "aa" + "a", then aa+a.
    auto model = BpeModel::Create(SmallVocab(), {{"a", "a"}}, false);
    REQUIRE(model.ok());
    CHECK(Encode(**model, "aaa") == V{6, 0});
    CHECK(Encode(**model, "aaaa") == V{6, 6});
  }
  {
    auto model = BpeModel::Create(SmallVocab(), {}, false);
    REQUIRE(model.ok());
    CHECK(Encode(**model, "abxc") == V{0, 1, 2});  // 'x' is not in the vocabulary: dropped
  }
}

TEST_CASE("BPE ignore_merges takes whole-piece vocabulary hits", "[tokenizer]") {
  auto plain = BpeModel::Create(SmallVocab(), {{"a", "b"}}, false);
  auto ignoring = BpeModel::Create(SmallVocab(), {{"a", "b"}}, true);
  REQUIRE(plain.ok());
  REQUIRE(ignoring.ok());
  CHECK(Encode(**plain, "abc") == std::vector<int32_t>{3, 2});
  CHECK(Encode(**ignoring, "abc") == std::vector<int32_t>{5});
}

TEST_CASE("BPE rejects merges with unknown tokens", "[tokenizer]") {
  auto unknown = BpeModel::Create(SmallVocab(), {{"a", "b"}, {"a", "zz"}}, false);
  REQUIRE_FALSE(unknown.ok());
  CHECK_THAT(std::string(unknown.status().message()),
             Catch::Contains("merge #1") && Catch::Contains("\"zz\""));
  auto result_missing = BpeModel::Create(SmallVocab(), {{"c", "a"}}, false);
  REQUIRE_FALSE(result_missing.ok());
  CHECK_THAT(std::string(result_missing.status().message()), Catch::Contains("\"ca\""));
  auto duplicate_id = BpeModel::Create({{"a", 0}, {"b", 0}}, {}, false);
  REQUIRE_FALSE(duplicate_id.ok());
  CHECK_THAT(std::string(duplicate_id.status().message()), Catch::Contains("id 0"));
  auto far_id = BpeModel::Create({{"a", 0}, {"b", 2000000000}}, {}, false);
  REQUIRE_FALSE(far_id.ok());
  CHECK_THAT(std::string(far_id.status().message()), Catch::Contains("2000000000"));
}

TEST_CASE("BPE cache is safe under concurrent use", "[tokenizer]") {
  auto model =
      BpeModel::Create(SmallVocab(), {{"a", "b"}, {"b", "c"}, {"ab", "c"}, {"a", "a"}}, false);
  REQUIRE(model.ok());
  const std::vector<std::string> pieces = {"abc", "aaa", "cab", "bca", "aabc", "cc", "a"};
  std::vector<std::vector<int32_t>> expected;
  for (const auto& p : pieces) expected.push_back(Encode(**model, p));
  std::vector<int> failures(4, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 2000; ++round) {
        const size_t i = static_cast<size_t>(round + t) % pieces.size();
        std::vector<int32_t> ids;
        (*model)->Encode(pieces[i] + (round % 2 ? "" : "a"), &ids);
        std::vector<int32_t> again;
        (*model)->Encode(pieces[i] + (round % 2 ? "" : "a"), &again);
        if (ids != again) ++failures[t];
      }
    });
  }
  for (auto& thread : threads) thread.join();
  CHECK(failures == std::vector<int>(4, 0));
  for (size_t i = 0; i < pieces.size(); ++i) CHECK(Encode(**model, pieces[i]) == expected[i]);
}

}  // namespace
}  // namespace dllm
