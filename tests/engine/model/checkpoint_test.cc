#include "engine/model/checkpoint.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>

#include "engine/model/float16.h"
#include "tests/engine/model/safetensors_fixture.h"

namespace dllm {
namespace {

namespace fs = std::filesystem;
using testing::Bf16Bytes;
using testing::F32Bytes;
using testing::FixtureTensor;
using testing::MakeTempDir;
using testing::WriteSafetensors;

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
  CHECK(va->bytes.size() == 24);
  std::vector<float> out;
  va->ToFloat(&out);
  CHECK(out == a);

  auto vb = (*ckpt)->Get("b");
  REQUIRE(vb.ok());
  CHECK(vb->dtype == DType::kBF16);
  vb->ToFloat(&out);
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

}  // namespace
}  // namespace dllm
