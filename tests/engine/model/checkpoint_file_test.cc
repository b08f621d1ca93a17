// CheckpointFile: exact reads, and a file that shrinks after Open is an error, not SIGBUS
// (the mmap reader it replaces died of SIGBUS on the same sequence).
#include "engine/model/checkpoint_file.h"

#include <catch2/catch.hpp>
#include <filesystem>
#include <numeric>
#include <string>
#include <vector>

#include "tests/engine/model/safetensors_fixture.h"

namespace dllm {
namespace {

namespace fs = std::filesystem;

std::string Message(const absl::Status& s) { return std::string(s.message()); }

// 4096 bytes whose value at offset i is i % 251, so that a wrong offset shows.
std::string Pattern() {
  std::string bytes(4096, '\0');
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>(i % 251);
  return bytes;
}

TEST_CASE("CheckpointFile reads exact byte ranges", "[checkpoint]") {
  const fs::path dir = testing::MakeTempDir("ckpt_file_read");
  const fs::path path = dir / "w.bin";
  testing::WriteBytes(path, Pattern());
  auto file = CheckpointFile::Open(path.string());
  REQUIRE(file.ok());
  CHECK((*file)->path() == path.string());
  CHECK((*file)->size_bytes() == 4096);
  std::vector<uint8_t> out(300);
  REQUIRE((*file)->Read(1000, out, "tensor 'w'").ok());
  for (size_t i = 0; i < out.size(); ++i) CHECK(out[i] == (1000 + i) % 251);
  std::vector<uint8_t> none;
  CHECK((*file)->Read(4096, none, "tensor 'empty'").ok());
  std::vector<uint8_t> all(4096);
  CHECK((*file)->Read(0, all, "whole file").ok());
  fs::remove_all(dir);
}

TEST_CASE("CheckpointFile reports a file truncated after Open, naming file, tensor and sizes",
          "[checkpoint]") {
  const fs::path dir = testing::MakeTempDir("ckpt_file_truncated");
  const fs::path path = dir / "model.safetensors";
  testing::WriteBytes(path, Pattern());
  auto file = CheckpointFile::Open(path.string());
  REQUIRE(file.ok());
  // Another process rewrites the checkpoint while the server is loading it.
  fs::resize_file(path, 1000);

  std::vector<uint8_t> before_cut(500);
  CHECK((*file)->Read(0, before_cut, "tensor 'a'").ok());  // bytes still there read fine

  std::vector<uint8_t> out(512);
  absl::Status past = (*file)->Read(2000, out, "tensor 'model.layers.0.q'");
  REQUIRE(absl::IsDataLoss(past));
  const std::string message = Message(past);
  INFO(message);
  CHECK(message.find(path.string()) != std::string::npos);
  CHECK(message.find("tensor 'model.layers.0.q'") != std::string::npos);
  CHECK(message.find("[2000, 2512)") != std::string::npos);
  CHECK(message.find("4096 bytes when opened, now 1000") != std::string::npos);
  CHECK(message.find("truncated") != std::string::npos);

  // A range that starts inside the file and runs past its new end.
  absl::Status straddle = (*file)->Read(900, out, "tensor 'b'");
  REQUIRE(absl::IsDataLoss(straddle));
  CHECK(Message(straddle).find("ends at 1000") != std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("CheckpointFile::Open errors name the path", "[checkpoint]") {
  const fs::path dir = testing::MakeTempDir("ckpt_file_open");
  auto missing = CheckpointFile::Open((dir / "nope").string());
  REQUIRE(absl::IsNotFound(missing.status()));
  CHECK(Message(missing.status()).find("nope") != std::string::npos);
  auto directory = CheckpointFile::Open(dir.string());
  REQUIRE(absl::IsInvalidArgument(directory.status()));
  CHECK(Message(directory.status()).find("not a regular file") != std::string::npos);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace dllm
