// Bearer-token authentication for the DiffusionLM service.
//
// Tokens come from a file (one per line, blank lines and '#' comments ignored) and/or an
// environment variable (tokens separated by commas or whitespace). A request authenticates
// with the metadata `authorization: Bearer <token>`. With no token source configured,
// authentication is off. The health service and reflection are never authenticated (they
// do not call Check).
//
// Thread-safety: immutable after Create; Check is safe from any thread.
#ifndef DLLM_SERVER_AUTH_H_
#define DLLM_SERVER_AUTH_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/config.h"

namespace dllm {

class TokenAuthenticator {
 public:
  // `getenv` is injectable for tests. Errors: NOT_FOUND for an unreadable tokens_file,
  // INVALID_ARGUMENT when a configured source holds no token (an empty list would lock
  // everyone out, which is never what the operator meant).
  static absl::StatusOr<std::unique_ptr<TokenAuthenticator>> Create(
      const AuthSection& auth,
      const std::function<std::optional<std::string>(const std::string&)>& getenv);

  bool enabled() const { return !tokens_.empty(); }
  size_t token_count() const { return tokens_.size(); }

  // `authorization` is the value of the authorization header, nullopt when absent.
  // OK when authentication is off or the token matches; UNAUTHENTICATED otherwise (the
  // message never echoes the presented token).
  absl::Status Check(std::optional<std::string_view> authorization) const;

 private:
  explicit TokenAuthenticator(std::vector<std::string> tokens) : tokens_(std::move(tokens)) {}
  std::vector<std::string> tokens_;
};

}  // namespace dllm

#endif  // DLLM_SERVER_AUTH_H_
