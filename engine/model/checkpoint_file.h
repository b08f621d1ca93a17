// CheckpointFile: one checkpoint file opened read-only and read with pread(2) into buffers the
// caller owns.
//
// Checkpoints used to be memory-mapped, and a file truncated by another process while it was
// mapped turned the next touch of a lost page into SIGBUS, which killed the server during load
// with no log line. Explicit reads turn the same event into an error: Read()
// checks the byte count it got and reports a file that has become shorter than the range asked
// for, naming the file, the caller's label (the tensor) and the sizes.
//
// The descriptor stays open while the object lives, so a file replaced by rename(2) during a
// load keeps being read consistently from the old inode. A file rewritten in place is read as
// it is now: if it got shorter, Read() fails cleanly; other bytes of the same size (zeros from
// a preallocated copy) cannot be told from weights here and are left to the model-level check
// (the server's warm-up, server/warmup.h).
//
// Thread-safety: immutable after Open(); Read() may be called from any thread (pread does not
// move a shared file offset).
#ifndef DLLM_ENGINE_MODEL_CHECKPOINT_FILE_H_
#define DLLM_ENGINE_MODEL_CHECKPOINT_FILE_H_

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace dllm {

class CheckpointFile {
 public:
  // NotFound if the path does not exist, PermissionDenied if it cannot be read,
  // InvalidArgument if it is not a regular file. Errors name the path.
  static absl::StatusOr<std::unique_ptr<CheckpointFile>> Open(const std::string& path);
  ~CheckpointFile();
  CheckpointFile(const CheckpointFile&) = delete;
  CheckpointFile& operator=(const CheckpointFile&) = delete;

  const std::string& path() const { return path_; }
  // The size at Open(). Callers validate offsets against it; Read() re-checks the file itself.
  uint64_t size_bytes() const { return size_bytes_; }

  // Reads exactly out.size() bytes starting at `offset` into `out`. `what` (e.g. "tensor 'x'")
  // only labels errors. DataLoss when the file now ends before offset + out.size() (it was
  // truncated or replaced in place since Open): the message names the file, `what`, the range
  // and both the size at Open and the current size. Unavailable for an I/O error. Short reads
  // and EINTR are retried, so a slow or network file system is not mistaken for truncation.
  absl::Status Read(uint64_t offset, std::span<uint8_t> out, std::string_view what) const;

 private:
  CheckpointFile(std::string path, int fd, uint64_t size_bytes)
      : path_(std::move(path)), fd_(fd), size_bytes_(size_bytes) {}

  std::string path_;
  int fd_;
  uint64_t size_bytes_;
};

}  // namespace dllm

#endif  // DLLM_ENGINE_MODEL_CHECKPOINT_FILE_H_
