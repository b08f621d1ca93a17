#include "server/auth.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "engine/core/file_text.h"

namespace dllm {
namespace {

// Compares without an early exit so that response timing does not reveal how much of a
// guessed token was right.
bool ConstantTimeEquals(std::string_view a, std::string_view b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  const size_t n = std::max(a.size(), b.size());
  for (size_t i = 0; i < n; ++i) {
    const unsigned char x = i < a.size() ? a[i] : 0;
    const unsigned char y = i < b.size() ? b[i] : 0;
    diff |= x ^ y;
  }
  return diff == 0;
}

}  // namespace

absl::StatusOr<std::unique_ptr<TokenAuthenticator>> TokenAuthenticator::Create(
    const AuthSection& auth,
    const std::function<std::optional<std::string>(const std::string&)>& getenv) {
  std::vector<std::string> tokens;
  if (!auth.tokens_file.empty()) {
    // A token list, not a data file: 1 MiB holds tens of thousands of tokens.
    absl::StatusOr<std::string> text = ReadFileText(auth.tokens_file, uint64_t{1} << 20);
    if (!text.ok()) {
      return absl::Status(text.status().code(),
                          absl::StrCat("auth.tokens_file: ", text.status().message()));
    }
    const size_t before = tokens.size();
    for (absl::string_view line : absl::StrSplit(*text, '\n')) {
      if (const size_t hash = line.find('#'); hash != absl::string_view::npos) {
        line = line.substr(0, hash);
      }
      const absl::string_view token = absl::StripAsciiWhitespace(line);
      if (!token.empty()) tokens.emplace_back(token);
    }
    if (tokens.size() == before) {
      return absl::InvalidArgumentError(
          absl::StrCat("auth.tokens_file: '", auth.tokens_file, "' holds no token"));
    }
  }
  if (!auth.tokens_env.empty()) {
    std::optional<std::string> value = getenv(auth.tokens_env);
    const size_t before = tokens.size();
    if (value) {
      for (absl::string_view part :
           absl::StrSplit(*value, absl::ByAnyChar(", \t\n"), absl::SkipEmpty())) {
        tokens.emplace_back(part);
      }
    }
    if (tokens.size() == before) {
      return absl::InvalidArgumentError(absl::StrCat("auth.tokens_env: environment variable ",
                                                     auth.tokens_env, " is unset or empty"));
    }
  }
  return std::unique_ptr<TokenAuthenticator>(new TokenAuthenticator(std::move(tokens)));
}

absl::Status TokenAuthenticator::Check(std::optional<std::string_view> authorization) const {
  if (tokens_.empty()) return absl::OkStatus();
  if (!authorization) {
    return absl::UnauthenticatedError("missing 'authorization: Bearer <token>' metadata");
  }
  std::string_view value = *authorization;
  constexpr std::string_view kBearer = "Bearer ";
  if (value.size() < kBearer.size() ||
      !absl::EqualsIgnoreCase(absl::string_view(value.data(), kBearer.size()),
                              absl::string_view(kBearer.data(), kBearer.size()))) {
    return absl::UnauthenticatedError("authorization metadata is not 'Bearer <token>'");
  }
  const absl::string_view stripped = absl::StripAsciiWhitespace(
      absl::string_view(value.data() + kBearer.size(), value.size() - kBearer.size()));
  const std::string_view presented(stripped.data(), stripped.size());
  bool match = false;
  for (const std::string& token : tokens_) match |= ConstantTimeEquals(presented, token);
  if (!match) return absl::UnauthenticatedError("invalid bearer token");
  return absl::OkStatus();
}

}  // namespace dllm
