#include "engine/model/checkpoint.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <optional>

#include "engine/core/float16.h"
#include "engine/model/checkpoint_file.h"
#include "nlohmann/json.hpp"
#include "tests/engine/model/safetensors_fixture.h"

namespace dllm {
namespace {

namespace fs = std::filesystem;
using testing::Bf16Bytes;
using testing::F32Bytes;
using testing::FixtureTensor;
using testing::MakeTempDir;
using testing::WriteSafetensors;
using Json = nlohmann::json;

bool Contains(const absl::Status& s, std::string_view text) {
  return std::string(s.message()).find(text) != std::string::npos;
}

TEST_CASE("Checkpoint opens a single model.safetensors and reads values", "[checkpoint]") {
  const fs::path dir = MakeTempDir("ckpt_single");
  const std::vector<float> a = {1.0f, -2.5f, 3.25f, 0.0f, 1e-3f, -7.0f};
  const std::vector<float> b = {0.5f, -0.125f, 100.0f, 3.0f};
  WriteSafetensors(dir / "model.safetensors",
                   {{"a", "F32", {2, 3}, F32Bytes(a)}, {"b", "BF16", {4}, Bf16Bytes(b)}},
                   {{"format", "pt"}});
  auto ckpt = Checkpoint::Open(dir.string());
  REQUIRE(ckpt.ok());
  CHECK((*ckpt)->TensorNames() == std::vector<std::string>{"a", "b"});

  auto va = (*ckpt)->Get("a");
  REQUIRE(va.ok());
  CHECK(va->dtype == DType::kF32);
  CHECK(va->shape == std::vector<int64_t>{2, 3});
  CHECK(va->NumElements() == 6);
  CHECK(va->SizeBytes() == 24);
  std::vector<float> out;
  REQUIRE(va->ToFloat(&out).ok());
  CHECK(out == a);

  auto vb = (*ckpt)->Get("b");
  REQUIRE(vb.ok());
  CHECK(vb->dtype == DType::kBF16);
  REQUIRE(vb->ToFloat(&out).ok());
  CHECK(out == b);  // all exactly representable in bf16

  auto missing = (*ckpt)->Get("nope");
  REQUIRE(!missing.ok());
  CHECK(absl::IsNotFound(missing.status()));
  CHECK(Contains(missing.status(), "nope"));
  fs::remove_all(dir);
}

TEST_CASE("Checkpoint reports a folder without weights", "[checkpoint]") {
  const fs::path dir = MakeTempDir("ckpt_empty");
  auto ckpt = Checkpoint::Open(dir.string());
  REQUIRE(!ckpt.ok());
  CHECK(Contains(ckpt.status(), "model.safetensors"));
  auto none = Checkpoint::Open((dir / "does_not_exist").string());
  REQUIRE(!none.ok());
  CHECK(Contains(none.status(), "does_not_exist"));
  fs::remove_all(dir);
}

// Message of a failed Open, with the parts it must mention checked.
void CheckOpenError(const fs::path& dir, std::initializer_list<std::string> parts) {
  auto ckpt = Checkpoint::Open(dir.string());
  REQUIRE(!ckpt.ok());
  const std::string message(ckpt.status().message());
  INFO(message);
  for (const std::string& part : parts) CHECK(message.find(part) != std::string::npos);
}

TEST_CASE("Checkpoint reads an independently written file exactly", "[checkpoint]") {
  // mixed.safetensors and its expected fp32 bits come from torch (make_fixtures.py).
  const fs::path data = fs::path(DLLM_TEST_DATA_DIR) / "safetensors";
  std::ifstream in(data / "mixed.expected.json");
  REQUIRE(in.good());
  const Json expected = Json::parse(in);
  auto ckpt = Checkpoint::OpenFile((data / "mixed.safetensors").string());
  if (!ckpt.ok()) FAIL(std::string(ckpt.status().message()));
  CHECK((*ckpt)->TensorNames().size() == expected.size());
  for (const auto& [name, want] : expected.items()) {
    INFO(name);
    auto view = (*ckpt)->Get(name);
    REQUIRE(view.ok());
    CHECK(DTypeName(view->dtype) == want["dtype"].get<std::string>());
    CHECK(view->shape == want["shape"].get<std::vector<int64_t>>());
    std::vector<float> values;
    REQUIRE(view->ToFloat(&values).ok());
    std::vector<uint32_t> bits;
    for (float v : values) bits.push_back(BitsFromFloat(v));
    CHECK(bits == want["f32_bits"].get<std::vector<uint32_t>>());
    CHECK(view->NumElements() == static_cast<int64_t>(values.size()));
    CHECK(view->SizeBytes() == static_cast<int64_t>(values.size()) * DTypeSize(view->dtype));
  }
}

TEST_CASE("Checkpoint rejects unsupported dtypes naming file and tensor", "[checkpoint]") {
  const fs::path data = fs::path(DLLM_TEST_DATA_DIR) / "safetensors";
  for (const char* file : {"unsupported_i8.safetensors", "unsupported_f64.safetensors"}) {
    auto ckpt = Checkpoint::OpenFile((data / file).string());
    REQUIRE(!ckpt.ok());
    const std::string message(ckpt.status().message());
    INFO(message);
    CHECK(message.find(file) != std::string::npos);
    CHECK(message.find("'w'") != std::string::npos);
    CHECK(message.find("not supported") != std::string::npos);
  }
}

TEST_CASE("Checkpoint opens a sharded folder with layers split across shards", "[checkpoint]") {
  const fs::path dir = MakeTempDir("ckpt_sharded");
  testing::TinyModelSpec spec;
  spec.shards = 3;
  const auto written = testing::WriteTinyModel(dir, spec);
  auto ckpt = Checkpoint::Open(dir.string());
  if (!ckpt.ok()) FAIL(std::string(ckpt.status().message()));
  CHECK((*ckpt)->TensorNames().size() == written.size());
  for (const auto& [name, tensor] : written) {
    auto view = (*ckpt)->Get(name);
    REQUIRE(view.ok());
    CHECK(view->shape == tensor.shape);
    std::vector<uint8_t> buffer;
    auto bytes = view->ReadBytes(&buffer);
    REQUIRE(bytes.ok());
    CHECK(std::vector<uint8_t>(bytes->begin(), bytes->end()) == tensor.bytes);
  }
  fs::remove_all(dir);
}

TEST_CASE("Checkpoint reports a file truncated after Open, naming file and tensor",
          "[checkpoint]") {
  // The file is rewritten between Open (headers validated) and the reads
  // of tensor bytes. The mmap reader died of SIGBUS here; reads now return DataLoss.
  for (int shards : {1, 2}) {
    DYNAMIC_SECTION("shards " << shards) {
      const fs::path dir = MakeTempDir("ckpt_truncated_after_open");
      testing::TinyModelSpec spec;
      spec.shards = shards;
      const auto written = testing::WriteTinyModel(dir, spec);
      auto ckpt = Checkpoint::Open(dir.string());
      if (!ckpt.ok()) FAIL(std::string(ckpt.status().message()));
      // The tensor stored last in its file, and that file cut just inside it.
      std::optional<TensorView> last;
      for (const std::string& name : (*ckpt)->TensorNames()) {
        auto view = (*ckpt)->Get(name);
        REQUIRE(view.ok());
        REQUIRE(view->file != nullptr);
        if (!last || view->file_offset > last->file_offset) last = *view;
      }
      REQUIRE(last.has_value());
      const std::string file = last->file->path();
      fs::resize_file(file, last->file_offset + 1);

      std::vector<uint8_t> buffer;
      auto bytes = last->ReadBytes(&buffer);
      REQUIRE(absl::IsDataLoss(bytes.status()));
      const std::string message(bytes.status().message());
      INFO(message);
      CHECK(message.find(file) != std::string::npos);
      CHECK(message.find("tensor '" + last->name + "'") != std::string::npos);
      CHECK(message.find("truncated") != std::string::npos);
      std::vector<float> values;
      CHECK(absl::IsDataLoss(last->ToFloat(&values)));
      fs::remove_all(dir);
    }
  }
}

TEST_CASE("Checkpoint index errors are clear", "[checkpoint]") {
  const fs::path dir = MakeTempDir("ckpt_index");
  testing::TinyModelSpec spec;
  spec.shards = 2;
  testing::WriteTinyModel(dir, spec);
  const fs::path index_path = dir / "model.safetensors.index.json";
  std::ifstream in(index_path);
  const Json index = Json::parse(in);
  in.close();
  auto write_index = [&](const Json& j) { testing::WriteBytes(index_path, j.dump()); };

  SECTION("missing shard file") {
    fs::remove(dir / "model-00002-of-00002.safetensors");
    CheckOpenError(dir, {"model-00002-of-00002.safetensors", "not found"});
  }
  SECTION("tensor listed in the index but absent from its shard") {
    Json j = index;
    j["weight_map"]["model.transformer.blocks.7.q_proj.weight"] =
        "model-00001-of-00002.safetensors";
    write_index(j);
    CheckOpenError(dir, {"model.transformer.blocks.7.q_proj.weight",
                         "model-00001-of-00002.safetensors", "not present"});
  }
  SECTION("tensor attributed to the wrong shard") {
    Json j = index;
    j["weight_map"]["model.transformer.wte.weight"] = "model-00002-of-00002.safetensors";
    write_index(j);
    CheckOpenError(dir, {"model.transformer.wte.weight", "model-00002-of-00002.safetensors"});
  }
  SECTION("invalid JSON") {
    testing::WriteBytes(index_path, "{\"weight_map\": {");
    CheckOpenError(dir, {"model.safetensors.index.json", "invalid JSON"});
  }
  SECTION("weight_map missing, empty or malformed") {
    write_index(Json{{"metadata", Json::object()}});
    CheckOpenError(dir, {"model.safetensors.index.json", "weight_map"});
    write_index(Json{{"weight_map", Json::object()}});
    CheckOpenError(dir, {"weight_map", "empty"});
    write_index(Json{{"weight_map", {{"a", 3}}}});
    CheckOpenError(dir, {"'a'", "file name"});
    write_index(Json::array());
    CheckOpenError(dir, {"model.safetensors.index.json", "object"});
  }
  SECTION("shard paths outside the folder") {
    for (const char* shard : {"../model.safetensors", "/etc/passwd", "", "a/../../b"}) {
      write_index(Json{{"weight_map", {{"a", shard}}}});
      CheckOpenError(dir, {"'a'", "relative path"});
    }
  }
  SECTION("corrupt shard names the shard and tensor") {
    const fs::path shard = dir / "model-00001-of-00002.safetensors";
    fs::resize_file(shard, fs::file_size(shard) - 3);
    CheckOpenError(dir, {"model-00001-of-00002.safetensors", "past the data section"});
  }
  SECTION("shard is a directory") {
    fs::remove(dir / "model-00002-of-00002.safetensors");
    fs::create_directory(dir / "model-00002-of-00002.safetensors");
    CheckOpenError(dir, {"model-00002-of-00002.safetensors", "not a regular file"});
  }
  fs::remove_all(dir);
}

TEST_CASE("Checkpoint errors for corrupt single files name the file", "[checkpoint]") {
  const fs::path dir = MakeTempDir("ckpt_corrupt");
  const fs::path file = dir / "model.safetensors";
  testing::WriteBytes(file, "");
  CheckOpenError(dir, {file.string(), "too short"});
  testing::WriteRawSafetensors(
      file, "{\"w\":{\"dtype\":\"I8\",\"shape\":[2],\"data_offsets\":[0,2]}}", "ab");
  CheckOpenError(dir, {file.string(), "'w'", "I8"});
  testing::WriteRawSafetensors(file, "{}", "", 1000);
  CheckOpenError(dir, {file.string(), "1000"});
  auto missing = Checkpoint::OpenFile((dir / "nope.safetensors").string());
  REQUIRE(!missing.ok());
  CHECK(absl::IsNotFound(missing.status()));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace dllm
