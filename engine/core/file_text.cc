#include "engine/core/file_text.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"

namespace dllm {

absl::StatusOr<std::string> ReadFileText(const std::string& path, uint64_t max_bytes) {
  std::error_code ec;
  const std::filesystem::file_status status = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(status)) {
    return absl::NotFoundError(
        absl::StrCat(path, ": cannot read: ", ec ? ec.message() : "no such file"));
  }
  if (!std::filesystem::is_regular_file(status)) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a regular file"));
  }
  const uintmax_t size = std::filesystem::file_size(path, ec);
  if (ec) return absl::NotFoundError(absl::StrCat(path, ": cannot read: ", ec.message()));
  if (size > max_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": ", size, " bytes is larger than the ", max_bytes, "-byte limit"));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::NotFoundError(absl::StrCat(path, ": cannot open: ", std::strerror(errno)));
  }
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return absl::DataLossError(absl::StrCat(path, ": read error"));
  return std::move(text).str();
}

}  // namespace dllm
