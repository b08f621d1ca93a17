// libFuzzer target: YAML text -> ParseServerConfig. An accepted config passes
// ValidateServerConfig (the parser's contract) and has a listen address with a port.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "server/config.h"

namespace {
void Require(bool condition) {
  if (!condition) std::abort();
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto config = dllm::ParseServerConfig(text, "fuzz.yaml");
  if (!config.ok()) {
    Require(!config.status().message().empty());
    return 0;
  }
  Require(dllm::ValidateServerConfig(*config).ok());
  Require(config->limits.max_prompt_tokens >= 1);
  Require(config->engine.queue_capacity >= 1);
  return 0;
}
