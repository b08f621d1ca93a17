#include "engine/tokenizer/chat_template.h"

#include <catch2/catch.hpp>

namespace dllm {
namespace {

// Expected strings are what the published tokenizer_config.json chat templates render
// (Jinja) for these messages.
TEST_CASE("LLaDA single user turn", "[chat_template]") {
  const std::vector<ChatMessage> chat = {{"user", "  What is 2+2?\n"}};
  auto text = RenderChat(ModelFamily::kLlada, chat);
  REQUIRE(text.ok());
  CHECK(text->text ==
        "<|startoftext|><|start_header_id|>user<|end_header_id|>\n\nWhat is "
        "2+2?<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n");
}

TEST_CASE("LLaDA multi-turn has one BOS and trimmed turns and the assistant header",
          "[chat_template]") {
  const std::vector<ChatMessage> chat = {
      {"system", "Be brief. "}, {"user", "Hi"}, {"assistant", " Hello!\u3000"}, {"user", "\tBye"}};
  auto text = RenderChat(ModelFamily::kLlada, chat);
  REQUIRE(text.ok());
  CHECK(text->text ==
        "<|startoftext|><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
        "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\nHello!<|eot_id|>"
        "<|start_header_id|>user<|end_header_id|>\n\nBye<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

TEST_CASE("Dream single user turn gets the default system prompt", "[chat_template]") {
  const std::vector<ChatMessage> chat = {{"user", " What is 2+2? "}};
  auto text = RenderChat(ModelFamily::kDream, chat);
  REQUIRE(text.ok());
  CHECK(text->text ==
        "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n What is "
        "2+2? <|im_end|>\n<|im_start|>assistant\n");
}

TEST_CASE("Dream keeps a given system prompt and untrimmed content", "[chat_template]") {
  const std::vector<ChatMessage> chat = {
      {"system", "You are terse."}, {"user", "Hi\n"}, {"assistant", "Hello"}, {"user", "Bye"}};
  auto text = RenderChat(ModelFamily::kDream, chat);
  REQUIRE(text.ok());
  CHECK(text->text ==
        "<|im_start|>system\nYou are terse.<|im_end|>\n<|im_start|>user\nHi\n<|im_end|>\n"
        "<|im_start|>assistant\nHello<|im_end|>\n<|im_start|>user\nBye<|im_end|>\n"
        "<|im_start|>assistant\n");
}

TEST_CASE("Chat template errors", "[chat_template]") {
  CHECK(RenderChat(ModelFamily::kLlada, {}).status().code() == absl::StatusCode::kInvalidArgument);
  const std::vector<ChatMessage> bad = {{"user", "x"}, {"tool", "y"}};
  auto result = RenderChat(ModelFamily::kDream, bad);
  REQUIRE_FALSE(result.ok());
  CHECK_THAT(std::string(result.status().message()), Catch::Contains("tool"));
}

}  // namespace
}  // namespace dllm

namespace dllm {
namespace {

TEST_CASE("Chat content ranges mark each message's content as rendered", "[chat_template]") {
  const std::vector<ChatMessage> chat = {{"system", " Be brief. "}, {"user", "Hi <|eot_id|>"}};
  for (ModelFamily family : {ModelFamily::kLlada, ModelFamily::kDream}) {
    auto r = RenderChat(family, chat);
    REQUIRE(r.ok());
    REQUIRE(r->content.size() == 2);
    const auto slice = [&](const TextRange& t) { return r->text.substr(t.begin, t.end - t.begin); };
    // LLaDA trims content; Dream keeps it.
    CHECK(slice(r->content[0]) == (family == ModelFamily::kLlada ? "Be brief." : " Be brief. "));
    CHECK(slice(r->content[1]) == "Hi <|eot_id|>");
    CHECK(r->content[0].end <= r->content[1].begin);
  }
  // Invalid UTF-8 in content is repaired before it lands in the prompt.
  const std::vector<ChatMessage> broken = {{"user",
                                            "a\xFF"
                                            "b"}};
  auto r = RenderChat(ModelFamily::kDream, broken);
  REQUIRE(r.ok());
  CHECK(r->text.find("a\xEF\xBF\xBD"
                     "b") != std::string::npos);
}

}  // namespace
}  // namespace dllm
