#include "server/auth.h"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>

namespace dllm {
namespace {

auto Env(std::map<std::string, std::string> vars) {
  return [vars](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

TEST_CASE("auth: disabled without token sources") {
  auto auth = TokenAuthenticator::Create(AuthSection{}, Env({}));
  REQUIRE(auth.ok());
  CHECK_FALSE((*auth)->enabled());
  CHECK((*auth)->Check(std::nullopt).ok());
}

TEST_CASE("auth: tokens from a file and an env var") {
  // mkstemp: a private file no other process can race us to.
  std::string path = (std::filesystem::temp_directory_path() / "dllm-auth-XXXXXX").string();
  const int fd = ::mkstemp(path.data());
  REQUIRE(fd >= 0);
  ::close(fd);
  {
    std::ofstream out(path);
    out << "# operators\nalpha-token\n\n  beta-token  # trailing comment\n";
  }
  AuthSection section;
  section.tokens_file = path;
  section.tokens_env = "DLLM_TEST_TOKENS";
  auto auth = TokenAuthenticator::Create(section, Env({{"DLLM_TEST_TOKENS", "gamma, delta"}}));
  std::remove(path.c_str());
  REQUIRE(auth.ok());
  CHECK((*auth)->token_count() == 4);
  for (const char* header :
       {"Bearer alpha-token", "Bearer beta-token", "bearer gamma", "Bearer delta"}) {
    CHECK((*auth)->Check(std::string_view(header)).ok());
  }
  for (std::optional<std::string_view> header :
       {std::optional<std::string_view>(), std::optional<std::string_view>("alpha-token"),
        std::optional<std::string_view>("Bearer alpha"),
        std::optional<std::string_view>("Bearer alpha-token-x"),
        std::optional<std::string_view>("Basic YWxwaGE="),
        std::optional<std::string_view>("Bearer ")}) {
    const absl::Status st = (*auth)->Check(header);
    CHECK(st.code() == absl::StatusCode::kUnauthenticated);
    // The presented secret is never echoed back.
    CHECK(std::string(st.message()).find("alpha") == std::string::npos);
  }
}

TEST_CASE("auth: configuration errors are reported") {
  AuthSection missing_file;
  missing_file.tokens_file = "/nonexistent/tokens";
  auto a = TokenAuthenticator::Create(missing_file, Env({}));
  REQUIRE_FALSE(a.ok());
  CHECK_THAT(std::string(a.status().message()), Catch::Contains("auth.tokens_file"));

  AuthSection unset_env;
  unset_env.tokens_env = "DLLM_UNSET";
  auto b = TokenAuthenticator::Create(unset_env, Env({{"DLLM_UNSET", " , "}}));
  REQUIRE_FALSE(b.ok());
  CHECK_THAT(std::string(b.status().message()), Catch::Contains("DLLM_UNSET"));
}

}  // namespace
}  // namespace dllm
