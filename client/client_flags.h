// dllm-client's Abseil flags (client/client_flags.cc; the options are described in
// client/client_options.h).
#ifndef DLLM_CLIENT_CLIENT_FLAGS_H_
#define DLLM_CLIENT_CLIENT_FLAGS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/client_options.h"

namespace dllm::client {

// Sets the flags from `args` (argv without the program name; options before or after the
// command), reads them once into a ClientOptions, restores their defaults and completes the
// options with FinishClientOptions. INVALID_ARGUMENT naming the flag on unknown flags or
// malformed values. With -h or --help (before any "--") only ClientOptions::help is set.
absl::StatusOr<ClientOptions> ParseClientOptions(const std::vector<std::string>& args);

}  // namespace dllm::client

#endif  // DLLM_CLIENT_CLIENT_FLAGS_H_
