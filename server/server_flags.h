// dllm-server's Abseil flags (server/server_flags.cc; the options are described in
// server/command_line.h).
#ifndef DLLM_SERVER_SERVER_FLAGS_H_
#define DLLM_SERVER_SERVER_FLAGS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/command_line.h"

namespace dllm {

// Sets the flags from `args` (argv without the program name), reads them once into a
// CommandLine and restores their defaults. INVALID_ARGUMENT naming the flag for unknown
// flags, missing or malformed values, and for arguments that are not flags.
absl::StatusOr<CommandLine> ParseCommandLine(const std::vector<std::string>& args);

}  // namespace dllm

#endif  // DLLM_SERVER_SERVER_FLAGS_H_
