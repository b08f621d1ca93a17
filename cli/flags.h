// The command-line front end shared by dllm-server, dllm-client and the benchmarks: sets the
// Abseil flags (ABSL_FLAG) a program defines next to its main() from argv.
//
// absl::ParseCommandLine itself is not used: in Abseil 20220623 it calls std::exit(1) on an
// unknown flag or a bad value and on --help (these programs exit 2 on usage errors and 0 on
// --help, and their tests call the parsers in-process), it matches flag names exactly (the
// programs' flags are spelled with dashes, --max-new-tokens, which a C++ identifier cannot
// be), and a repeated flag keeps only its last value (absl parses every occurrence into a
// fresh copy of the default). Everything else is Abseil's: the flag registry
// (absl::FindCommandLineFlag) and the typed parsing of values (absl::CommandLineFlag::ParseFrom,
// i.e. the flag type's AbslParseFlag).
//
// Accepted:
//   --name=VALUE, --name VALUE   non-bool flags (the value may start with '-')
//   --name, --name=true|false    bool flags (absl's spellings: 1/0, yes/no, t/f, y/n too)
//   -h, --help                   anywhere before "--": ParsedArgs::help, nothing else is parsed
//   --                           everything after it is positional
// A flag given twice keeps the last value (as with absl::ParseCommandLine). An empty value
// for an optional flag ("--config ''", "--model="), which Abseil would read as unset, is an
// error naming the flag, never the default; a plain string flag takes "" as given.
// Dashes in a name stand for the flag's underscores (--max-new-tokens sets
// FLAGS_max_new_tokens; --max_new_tokens works too). Every other argument, one starting with a
// single '-' included (a prompt may), is positional.
#ifndef DLLM_CLI_FLAGS_H_
#define DLLM_CLI_FLAGS_H_

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace dllm::cli {

struct ParsedArgs {
  bool help = false;
  // The arguments that are neither flags nor flag values, in order.
  std::vector<std::string> positional;
  // Every value of each repeated option (ParseFlags' `repeated`), in command-line order, keyed
  // by the name as given there; an option that was not given has no entry.
  std::map<std::string, std::vector<std::string>> repeated;
};

// Sets the Abseil flags registered in this binary from `args` (argv without the program
// name), calls `read` (which reads them, absl::GetFlag, into the caller's options struct:
// the only place that reads them) and then returns every flag it set to its previous value,
// so that the flags hold a command line's values only during `read`. `repeated` names options
// (as spelled on the command line, e.g. "policy") that may be given several times and whose
// values are all kept in ParsedArgs::repeated; they are not Abseil flags, and their values
// are not split (they may contain commas).
//
// Returns read's status, or without calling it INVALID_ARGUMENT naming the flag as written
// for an unknown flag ("unknown flag '--prot'"), a missing value ("--port: missing value") or
// a value the flag's type rejects ("--port: Illegal value 'x' specified for flag 'port'").
//
// Not thread-safe: the flags are process-wide, so two calls must not overlap (programs call it
// once from main; tests call it from one thread).
//
// (absl::FlagSaver would restore the flags too, but logs a line on stderr for every flag it
// restores.)
absl::Status ParseFlags(const std::vector<std::string>& args,
                        const std::vector<std::string>& repeated,
                        const std::function<absl::Status(const ParsedArgs&)>& read);

}  // namespace dllm::cli

#endif  // DLLM_CLI_FLAGS_H_
