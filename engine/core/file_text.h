// ReadFileText: a whole small file (a config, a tokenizer file, a PEM key) into a string,
// bounded in size, with errors that name the file. The one reader for every such file in the
// engine, server and client.
#ifndef DLLM_ENGINE_CORE_FILE_TEXT_H_
#define DLLM_ENGINE_CORE_FILE_TEXT_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace dllm {

// NOT_FOUND when `path` does not exist or cannot be opened; INVALID_ARGUMENT when it is not
// a regular file or holds more than `max_bytes`; DATA_LOSS on a read error. Each message
// starts with the path.
absl::StatusOr<std::string> ReadFileText(const std::string& path, uint64_t max_bytes);

}  // namespace dllm

#endif  // DLLM_ENGINE_CORE_FILE_TEXT_H_
