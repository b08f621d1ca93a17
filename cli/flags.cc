#include "cli/flags.h"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <utility>

#include "absl/flags/commandlineflag.h"
#include "absl/flags/reflection.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/string_view.h"

namespace dllm::cli {
namespace {

// The flags Parse set, with their values from before; restores them when destroyed.
class Restorer {
 public:
  Restorer() = default;
  Restorer(const Restorer&) = delete;
  Restorer& operator=(const Restorer&) = delete;
  ~Restorer() {
    std::string error;
    for (auto& [flag, value] : saved_) flag->ParseFrom(value, &error);
  }
  void Save(absl::CommandLineFlag* flag) {
    for (const auto& [f, value] : saved_)
      if (f == flag) return;
    saved_.emplace_back(flag, flag->CurrentValue());
  }

 private:
  std::vector<std::pair<absl::CommandLineFlag*, std::string>> saved_;
};

bool IsOptionalFlag(const absl::CommandLineFlag& flag) {
  return flag.IsOfType<std::optional<std::string>>() || flag.IsOfType<std::optional<int>>() ||
         flag.IsOfType<std::optional<double>>() || flag.IsOfType<std::optional<bool>>() ||
         flag.IsOfType<std::optional<int64_t>>();
}

absl::StatusOr<ParsedArgs> Parse(const std::vector<std::string>& args,
                                 const std::vector<std::string>& repeated, Restorer& restorer) {
  ParsedArgs parsed;
  const auto end = std::find(args.begin(), args.end(), "--");
  if (std::any_of(args.begin(), end,
                  [](const std::string& a) { return a == "-h" || a == "--help"; })) {
    parsed.help = true;
    return parsed;
  }
  for (auto it = args.begin(); it != end; ++it) {
    const absl::string_view arg = *it;
    if (arg.size() < 3 || arg.substr(0, 2) != "--") {
      parsed.positional.push_back(*it);
      continue;
    }
    // "--name" or "--name=value"; `spelled` is the flag as written, for messages.
    const size_t eq = arg.find('=');
    const absl::string_view spelled = arg.substr(0, eq);
    std::optional<std::string> value;
    if (eq != absl::string_view::npos) value = std::string(arg.substr(eq + 1));
    const std::string name = absl::StrReplaceAll(spelled.substr(2), {{"-", "_"}});
    auto take_value = [&]() -> absl::StatusOr<std::string> {
      if (value) return *value;
      if (it + 1 == end) {
        return absl::InvalidArgumentError(absl::StrCat(spelled, ": missing value"));
      }
      return *++it;
    };
    const auto r = std::find_if(repeated.begin(), repeated.end(), [&](const std::string& n) {
      return absl::StrReplaceAll(n, {{"-", "_"}}) == name;
    });
    if (r != repeated.end()) {
      absl::StatusOr<std::string> v = take_value();
      if (!v.ok()) return v.status();
      parsed.repeated[*r].push_back(*std::move(v));
      continue;
    }
    absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
    if (flag == nullptr || flag->IsRetired()) {
      return absl::InvalidArgumentError(absl::StrCat("unknown flag '", spelled, "'"));
    }
    if (flag->IsOfType<bool>() && !value) value = "true";
    absl::StatusOr<std::string> v = take_value();
    if (!v.ok()) return v.status();
    // An optional flag parses "" as unset, i.e. its default: a templated command line whose
    // variable is unset, `--config "$CFG"`, must not start on the built-in configuration.
    // (Where "" is a value, as gRPC health's whole-server service name, the flag is a plain
    // string and takes it.)
    if (v->empty() && IsOptionalFlag(*flag)) {
      return absl::InvalidArgumentError(
          absl::StrCat(spelled, ": empty value (leave the flag out for its default)"));
    }
    restorer.Save(flag);
    if (std::string error; !flag->ParseFrom(*v, &error)) {
      return absl::InvalidArgumentError(absl::StrCat(spelled, ": ", error));
    }
  }
  if (end != args.end()) parsed.positional.insert(parsed.positional.end(), end + 1, args.end());
  return parsed;
}

}  // namespace

absl::Status ParseFlags(const std::vector<std::string>& args,
                        const std::vector<std::string>& repeated,
                        const std::function<absl::Status(const ParsedArgs&)>& read) {
  Restorer restorer;
  absl::StatusOr<ParsedArgs> parsed = Parse(args, repeated, restorer);
  if (!parsed.ok()) return parsed.status();
  return read(*parsed);
}

}  // namespace dllm::cli
