#include "engine/core/file_text.h"

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <string>

namespace dllm {
namespace {

TEST_CASE("file text: reads a whole file; names the file in every refusal") {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "dllm-file-text-test";
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "a.txt").string();
  {
    std::ofstream out(path, std::ios::binary);
    out << std::string("line\n\0two", 9);
  }
  absl::StatusOr<std::string> text = ReadFileText(path, 9);
  REQUIRE(text.ok());
  CHECK(*text == std::string("line\n\0two", 9));

  absl::StatusOr<std::string> big = ReadFileText(path, 8);
  CHECK(big.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(std::string(big.status().message()) == path + ": 9 bytes is larger than the 8-byte limit");

  absl::StatusOr<std::string> missing = ReadFileText((dir / "none").string(), 100);
  CHECK(missing.status().code() == absl::StatusCode::kNotFound);
  CHECK_THAT(std::string(missing.status().message()),
             Catch::StartsWith((dir / "none").string() + ": cannot read"));

  absl::StatusOr<std::string> folder = ReadFileText(dir.string(), 100);
  CHECK(folder.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(std::string(folder.status().message()) == dir.string() + ": not a regular file");
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace dllm
