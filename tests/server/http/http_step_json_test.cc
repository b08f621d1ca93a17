#include "server/http/http_step_json.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <string>

#include "absl/strings/str_cat.h"
#include "engine/tokenizer/tokenizer.h"
#include "server/http/http_openai_mapping.h"

namespace dllm {
namespace {

using nlohmann::json;

// Ids 10..265 are the bytes 0..255; 7 is a special token "<|eot|>".
class ByteTokenizer final : public Tokenizer {
 public:
  using Tokenizer::Encode;
  std::vector<int32_t> Encode(std::string_view, std::span<const TextRange>) const override {
    return {};
  }
  std::string Decode(std::span<const int32_t>, bool) const override { return ""; }
  std::string TokenBytes(int32_t id) const override {
    if (id == 7) return "<|eot|>";
    if (id >= 10 && id < 266) return std::string(1, static_cast<char>(id - 10));
    return "";
  }
  std::optional<int32_t> TokenToId(std::string_view) const override { return std::nullopt; }
  bool IsSpecial(int32_t id) const override { return id == 7; }
  int32_t size() const override { return 266; }
};

StepEvent Event() {
  StepEvent e;
  e.step = 4;
  e.full = false;
  e.rows = 41;
  e.max_committed_entropy = 0.25f;
  e.tau_nats = 0.5f;
  e.window_begin = 8;
  e.window_end = 16;
  e.committed_positions = {9, 10};
  e.committed_tokens = {10 + 'h', 7};
  e.provisional_positions = {11};
  e.provisional_tokens = {10 + 'i'};
  return e;
}

TEST_CASE("step json: every field, tokens as text with special marks") {
  ByteTokenizer tokenizer;
  const json j = StepEventJson(Event(), tokenizer, "chatcmpl-1", true);
  CHECK(j["object"] == "dllm.step");
  CHECK(j["id"] == "chatcmpl-1");
  CHECK(j["step"] == 4);
  CHECK(j["kind"] == "partial");
  CHECK(j["rows"] == 41);
  CHECK(j["max_entropy"].get<double>() == Approx(0.25));
  CHECK(j["tau"].get<double>() == Approx(0.5));
  CHECK(j["window"] == json::array({8, 16}));
  CHECK(j["committed"] == json::parse(R"([[9, "h", 0], [10, "<|eot|>", 1]])"));
  CHECK(j["provisional"] == json::parse(R"([[11, "i", 0]])"));
}

TEST_CASE("step json: dropped proposals, policies without tau, never-refreshing tau") {
  ByteTokenizer tokenizer;
  StepEvent e = Event();
  e.full = true;
  e.tau_nats = std::numeric_limits<float>::quiet_NaN();
  json j = StepEventJson(e, tokenizer, "x", false);
  CHECK(j["kind"] == "full");
  CHECK(j["tau"].is_null());
  CHECK_FALSE(j.contains("provisional"));
  e.tau_nats = std::numeric_limits<float>::infinity();
  CHECK(StepEventJson(e, tokenizer, "x", true)["tau"] == "inf");
  e.tau_nats = -std::numeric_limits<float>::infinity();  // tau < 0: every step full
  CHECK(StepEventJson(e, tokenizer, "x", true)["tau"] == "-inf");
}

TEST_CASE("step json: half a UTF-8 character and unknown ids still give valid JSON") {
  ByteTokenizer tokenizer;
  StepEvent e = Event();
  e.committed_positions = {0, 1};
  e.committed_tokens = {10 + 0xE2, 999};  // the first byte of a 3-byte character; no such id
  const std::string dumped = DumpJson(StepEventJson(e, tokenizer, "x", true));
  const json back = json::parse(dumped);             // throws on invalid UTF-8
  CHECK(back["committed"][0][1] == "\xEF\xBF\xBD");  // U+FFFD
  CHECK(back["committed"][1] == json::parse(R"([1, "", 0])"));
}

}  // namespace
}  // namespace dllm
