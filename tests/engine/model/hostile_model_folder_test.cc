// Hostile or unusual model folders at load time (the hostile probe's defects 1, 7, 8 and
// 11): each case edits a copy of a shipped tiny model and checks that loading (or the first
// generation) fails cleanly with a message naming the cause, or (unaligned safetensors) that
// the model loads and answers exactly like the original.
#include <catch2/catch.hpp>
#include <cstring>

#include "engine/engine.h"
#include "tests/engine/scheduler/collect_sink.h"
#include "tests/support/model_copy.h"

namespace dllm {
namespace {

using testing::Json;
using testing::Load;
using testing::ModelCopy;
using testing::ReadFile;
using testing::WriteFile;
namespace fs = std::filesystem;

FinalEvent Generate(Engine& engine, const std::string& prompt) {
  GenerationRequest request;
  request.messages = {ChatMessage{"user", prompt}};
  request.max_new_tokens = 8;
  request.decoding = engine.model_info().default_decoding;
  request.decoding.block_length = 8;
  request.cache = engine.model_info().default_cache;
  auto sink = std::make_shared<testing::CollectSink>();
  auto id = engine.Submit(std::move(request), sink);
  REQUIRE(id.ok());
  return sink->Wait();
}

std::string Message(const absl::Status& status) { return std::string(status.message()); }

TEST_CASE("model folder: a huge n_layers fails cleanly, naming the field", "[reliability]") {
  for (const char* value : {"2147483647", "1000000"}) {
    INFO("n_layers = " << value);
    ModelCopy model("llada-tiny");
    model.EditConfig([&](Json& c) { c["n_layers"] = std::stoll(value); });
    absl::StatusOr<std::unique_ptr<Engine>> engine;
    REQUIRE_NOTHROW(engine = Load(model.dir()));  // was std::bad_alloc (abort at start-up)
    REQUIRE_FALSE(engine.ok());
    CHECK(absl::IsInvalidArgument(engine.status()));
    CHECK_THAT(Message(engine.status()),
               Catch::Contains("n_layers") && Catch::Contains(value) && Catch::Contains("blocks."));
  }
  ModelCopy dream("dream-tiny");
  dream.EditConfig([](Json& c) { c["num_hidden_layers"] = 2147483647; });
  absl::StatusOr<std::unique_ptr<Engine>> engine;
  REQUIRE_NOTHROW(engine = Load(dream.dir()));
  REQUIRE_FALSE(engine.ok());
  CHECK_THAT(Message(engine.status()), Catch::Contains("num_hidden_layers"));
}

TEST_CASE("model folder: mask_token_id equal to eos_token_id is refused", "[reliability]") {
  for (const char* name : {"llada-tiny", "dream-tiny"}) {
    INFO(name);
    ModelCopy model(name);
    model.EditConfig([](Json& c) { c["mask_token_id"] = c["eos_token_id"]; });
    absl::StatusOr<std::unique_ptr<Engine>> engine = Load(model.dir());
    REQUIRE_FALSE(engine.ok());
    CHECK(absl::IsInvalidArgument(engine.status()));
    CHECK_THAT(Message(engine.status()),
               Catch::Contains("mask_token_id") && Catch::Contains("eos_token_id"));
  }
}

// Rewrites model.safetensors with every tensor shifted by one byte, so that no BF16/F32
// tensor starts at a multiple of its element size (the data section itself starts 8-aligned).
void MisalignSafetensors(const fs::path& file) {
  const std::string bytes = ReadFile(file);
  uint64_t header_len = 0;
  std::memcpy(&header_len, bytes.data(), 8);
  Json header = Json::parse(bytes.substr(8, header_len));
  for (auto& [name, entry] : header.items()) {
    if (name == "__metadata__") continue;
    entry["data_offsets"][0] = entry["data_offsets"][0].get<uint64_t>() + 1;
    entry["data_offsets"][1] = entry["data_offsets"][1].get<uint64_t>() + 1;
  }
  std::string text = header.dump();
  while ((8 + text.size()) % 8 != 0) text += ' ';
  const uint64_t new_len = text.size();
  std::string out(8, '\0');
  std::memcpy(out.data(), &new_len, 8);
  out += text;
  out += '\0';  // the one-byte shift
  out += bytes.substr(8 + header_len);
  WriteFile(file, out);
}

TEST_CASE("model folder: safetensors data not aligned to the element size loads", "[reliability]") {
  for (const char* name : {"llada-tiny", "dream-tiny"}) {
    INFO(name);
    ModelCopy original(name);
    ModelCopy shifted(name);
    MisalignSafetensors(shifted.dir() / "model.safetensors");
    auto reference = Load(original.dir());
    REQUIRE(reference.ok());
    auto engine = Load(shifted.dir());
    REQUIRE(engine.ok());  // was "not aligned to its 2-byte element size"
    for (const char* prompt : {"What is 7 + 3?", "Sort: 3 1 2"}) {
      const FinalEvent want = Generate(**reference, prompt);
      const FinalEvent got = Generate(**engine, prompt);
      REQUIRE(want.status.ok());
      REQUIRE(got.status.ok());
      CHECK(got.token_ids == want.token_ids);
      CHECK(!got.token_ids.empty());
    }
  }
}

// Sets every element of one BF16 tensor to NaN (0x7fc0) or +Inf (0x7f80).
void PoisonTensor(const fs::path& file, const std::string& tensor, uint16_t value) {
  std::string bytes = ReadFile(file);
  uint64_t header_len = 0;
  std::memcpy(&header_len, bytes.data(), 8);
  const Json header = Json::parse(bytes.substr(8, header_len));
  const Json& entry = header.at(tensor);
  REQUIRE(entry.at("dtype") == "BF16");
  const uint64_t begin = 8 + header_len + entry["data_offsets"][0].get<uint64_t>();
  const uint64_t end = 8 + header_len + entry["data_offsets"][1].get<uint64_t>();
  for (uint64_t i = begin; i + 1 < end; i += 2) std::memcpy(&bytes[i], &value, 2);
  WriteFile(file, bytes);
}

TEST_CASE("model folder: NaN or Inf weights are reported as non-finite logits (INTERNAL)",
          "[reliability]") {
  for (uint16_t poison : {uint16_t{0x7fc0}, uint16_t{0x7f80}}) {
    INFO("poison " << poison);
    ModelCopy model("llada-tiny");
    PoisonTensor(model.dir() / "model.safetensors", "model.transformer.ln_f.weight", poison);
    auto engine = Load(model.dir());
    REQUIRE(engine.ok());
    const FinalEvent final = Generate(**engine, "What is 7 + 3?");
    CHECK(final.reason == FinishReason::kError);
    CHECK(absl::IsInternal(final.status));  // was INVALID_ARGUMENT "token id -1 ..."
    CHECK_THAT(Message(final.status), Catch::Contains("non-finite logits"));
  }
}

}  // namespace
}  // namespace dllm
