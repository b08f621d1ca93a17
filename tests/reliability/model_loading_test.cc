// Reliability: hostile or unusual model folders (issue 15, defects 1, 7, 8, 11; issue 34,
// item 9). Each case edits a copy of a shipped tiny model and checks that loading (or the
// warm-up generation) fails cleanly with a message naming the cause, or (unaligned
// safetensors) that the model loads and answers exactly like the original.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "engine/engine.h"
#include "server/warmup.h"
#include "tests/engine/scheduler/collect_sink.h"

namespace dllm {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void WriteFile(const fs::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
}

// A fresh copy of models/<name> in a temporary folder (removed on destruction).
class ModelCopy {
 public:
  explicit ModelCopy(const std::string& name) {
    dir_ =
        fs::temp_directory_path() / ("dllm-reliability-" + name + "-" + std::to_string(::getpid()) +
                                     "-" + std::to_string(counter_++));
    fs::remove_all(dir_);
    fs::copy(fs::path(DLLM_SOURCE_DIR) / "models" / name, dir_, fs::copy_options::recursive);
  }
  ~ModelCopy() { fs::remove_all(dir_); }
  const fs::path& dir() const { return dir_; }

  void EditConfig(const std::function<void(Json&)>& edit) {
    Json config = Json::parse(ReadFile(dir_ / "config.json"));
    edit(config);
    WriteFile(dir_ / "config.json", config.dump(2));
  }

 private:
  static inline int counter_ = 0;
  fs::path dir_;
};

absl::StatusOr<std::unique_ptr<Engine>> Load(const fs::path& dir) {
  EngineOptions options;
  options.model_dir = dir.string();
  options.cpu_threads = 1;
  options.kv_budget_bytes = int64_t{64} << 20;
  return Engine::Create(options);
}

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

TEST_CASE("reliability: a huge n_layers fails cleanly, naming the field", "[reliability]") {
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

TEST_CASE("reliability: mask_token_id equal to eos_token_id is refused", "[reliability]") {
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

TEST_CASE("reliability: safetensors data not aligned to the element size loads", "[reliability]") {
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

TEST_CASE("reliability: NaN or Inf weights are reported as non-finite logits (INTERNAL)",
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

// Overwrites the data section of a safetensors file with zeros, keeping its header: what a
// checkpoint rewritten in place (e.g. a copy still being written, or a preallocated file)
// looks like. Shapes and sizes stay valid, so only the model's output can tell.
void ZeroWeights(const fs::path& file) {
  std::string bytes = ReadFile(file);
  uint64_t header_len = 0;
  std::memcpy(&header_len, bytes.data(), 8);
  std::fill(bytes.begin() + 8 + static_cast<std::ptrdiff_t>(header_len), bytes.end(), '\0');
  WriteFile(file, bytes);
}

const char* const kShippedModels[] = {"llada-tiny", "dream-tiny", "llada-long", "dream-long"};

TEST_CASE("reliability: warm-up refuses a model whose weights are all zero", "[reliability]") {
  // Issue 34, item 9: a checkpoint overwritten with zeros during load went unnoticed, warm-up
  // passed and the server answered token 0 (NUL bytes) to every request.
  for (const char* name : kShippedModels) {
    DYNAMIC_SECTION(name) {
      ModelCopy model(name);
      ZeroWeights(model.dir() / "model.safetensors");
      auto engine = Load(model.dir());
      REQUIRE(engine.ok());  // shapes and sizes are intact: loading cannot tell
      const absl::Status warmup = RunWarmup(**engine, absl::Seconds(120));
      INFO(Message(warmup));
      CHECK(absl::IsDataLoss(warmup));
      CHECK_THAT(Message(warmup),
                 Catch::Contains("the model's output is degenerate: every predicted "
                                 "distribution is uniform"));
      CHECK_THAT(Message(warmup), Catch::Contains("all zero"));
    }
  }
}

TEST_CASE("reliability: warm-up accepts every shipped model and reference fixture",
          "[reliability]") {
  // The degenerate-output check must not refuse a real model: the trained models in models/
  // and the random-weight fixtures the e2e tests serve.
  std::vector<fs::path> dirs;
  for (const char* name : kShippedModels)
    dirs.push_back(fs::path(DLLM_SOURCE_DIR) / "models" / name);
  for (const char* name : {"llada_mha", "llada_gqa_f32", "dream_gqa", "dream_f16"}) {
    dirs.push_back(fs::path(DLLM_TEST_DATA_DIR) / "reference" / name);
  }
  for (const fs::path& dir : dirs) {
    DYNAMIC_SECTION(dir.filename().string()) {
      auto engine = Load(dir);
      REQUIRE(engine.ok());
      const absl::Status warmup = RunWarmup(**engine, absl::Seconds(120));
      INFO(Message(warmup));
      CHECK(warmup.ok());
    }
  }
}

}  // namespace
}  // namespace dllm
