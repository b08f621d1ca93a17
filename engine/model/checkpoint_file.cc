#include "engine/model/checkpoint_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"

namespace dllm {
namespace {

// absl 20220623 (Debian) has its own string_view type; std::string_view must be converted.
absl::string_view Av(std::string_view s) { return absl::string_view(s.data(), s.size()); }

// One pread(2) asks for at most this much: Linux transfers at most 0x7ffff000 bytes per call
// anyway, and smaller calls keep the loop's progress simple to reason about.
constexpr size_t kMaxReadChunkBytes = size_t{1} << 30;

}  // namespace

absl::StatusOr<std::unique_ptr<CheckpointFile>> CheckpointFile::Open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    std::string message = absl::StrCat(path, ": cannot open: ", std::strerror(err));
    if (err == ENOENT) return absl::NotFoundError(message);
    if (err == EACCES) return absl::PermissionDeniedError(message);
    return absl::UnavailableError(message);
  }
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return absl::UnavailableError(absl::StrCat(path, ": cannot stat: ", std::strerror(err)));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a regular file"));
  }
  return std::unique_ptr<CheckpointFile>(
      new CheckpointFile(path, fd, static_cast<uint64_t>(st.st_size)));
}

CheckpointFile::~CheckpointFile() { ::close(fd_); }

absl::Status CheckpointFile::Read(uint64_t offset, std::span<uint8_t> out,
                                  std::string_view what) const {
  const uint64_t end = offset + out.size();
  if (end < offset || end > static_cast<uint64_t>(std::numeric_limits<off_t>::max())) {
    return absl::InvalidArgumentError(absl::StrCat(path_, ": ", Av(what), ": byte range at ",
                                                   offset, " of ", out.size(),
                                                   " bytes overflows a file offset"));
  }
  size_t done = 0;
  while (done < out.size()) {
    const size_t want = std::min(out.size() - done, kMaxReadChunkBytes);
    const ssize_t got = ::pread(fd_, out.data() + done, want, static_cast<off_t>(offset + done));
    if (got < 0) {
      const int err = errno;
      if (err == EINTR) continue;
      return absl::UnavailableError(absl::StrCat(path_, ": ", Av(what), ": read of ", want,
                                                 " bytes at offset ", offset + done,
                                                 " failed: ", std::strerror(err)));
    }
    if (got == 0) {
      // End of file before the range ends: the file is shorter than when it was opened.
      struct stat st;
      const std::string now = ::fstat(fd_, &st) == 0
                                  ? absl::StrCat("now ", static_cast<uint64_t>(st.st_size))
                                  : std::string("now shorter");
      return absl::DataLossError(absl::StrCat(
          path_, ": ", Av(what), ": needs bytes [", offset, ", ", end, ") but the file ends at ",
          offset + done, " (", size_bytes_, " bytes when opened, ", now,
          "): it was truncated or rewritten while the model was loading"));
    }
    done += static_cast<size_t>(got);
  }
  return absl::OkStatus();
}

}  // namespace dllm
