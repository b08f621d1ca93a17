// MappedFile: a read-only memory mapping of a whole regular file.
//
// Pages are read lazily by the kernel on first touch; mapping a 5 GB shard costs no I/O.
// If another process truncates the file while it is mapped, touching the lost pages raises
// SIGBUS: checkpoints must not be rewritten in place while a server uses them.
//
// Thread-safety: immutable after Open(); bytes() may be read from any thread.
#ifndef DLLM_ENGINE_MODEL_MAPPED_FILE_H_
#define DLLM_ENGINE_MODEL_MAPPED_FILE_H_

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "absl/status/statusor.h"

namespace dllm {

class MappedFile {
 public:
  // NotFound if the path does not exist; InvalidArgument if it is not a regular file.
  static absl::StatusOr<std::unique_ptr<MappedFile>> Open(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const std::string& path() const { return path_; }
  // The whole file; empty for an empty file. Valid while this object lives.
  std::span<const uint8_t> bytes() const { return {data_, size_bytes_}; }

 private:
  MappedFile(std::string path, const uint8_t* data, size_t size_bytes)
      : path_(std::move(path)), data_(data), size_bytes_(size_bytes) {}

  std::string path_;
  const uint8_t* data_;
  size_t size_bytes_;
};

}  // namespace dllm

#endif  // DLLM_ENGINE_MODEL_MAPPED_FILE_H_
