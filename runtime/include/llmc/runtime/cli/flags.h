// A small command-line flag parser for the runtime's subcommands. The runtime
// cannot use llvm::cl (no LLVM in the runtime), and it must not throw, so the
// parser reports problems as absl::Status naming the flag at fault.
//
// Accepted forms: `--name=value`, `--name value`, `-n value` (short alias),
// `--flag` / `--no-flag` for booleans, and `--` to end flags.
#ifndef LLMC_RUNTIME_CLI_FLAGS_H_
#define LLMC_RUNTIME_CLI_FLAGS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace llmc::cli {

class FlagSet {
 public:
  // `usage` is the synopsis line, e.g. "llmc run ARTIFACT [flags]".
  FlagSet(std::string usage, std::string description);

  void AddString(std::string name, std::string* out, std::string help, char short_name = 0);
  void AddInt(std::string name, int64_t* out, std::string help, char short_name = 0);
  void AddDouble(std::string name, double* out, std::string help, char short_name = 0);
  void AddBool(std::string name, bool* out, std::string help);

  // Parses argv[1..argc-1]. `--help`/`-h` sets help_requested() and stops.
  absl::Status Parse(int argc, const char* const* argv);

  bool help_requested() const { return help_requested_; }
  const std::vector<std::string>& positional() const { return positional_; }
  // The synopsis, the description and one line per flag with its default.
  std::string Usage() const;

 private:
  enum class Kind { kString, kInt, kDouble, kBool };
  struct Flag {
    std::string name;
    char short_name;
    Kind kind;
    void* out;
    std::string help;
    std::string default_text;
  };
  const Flag* Find(const std::string& name) const;
  const Flag* FindShort(char c) const;
  absl::Status Assign(const Flag& flag, const std::string& value) const;
  void Add(Flag flag);

  std::string usage_;
  std::string description_;
  std::vector<Flag> flags_;
  std::vector<std::string> positional_;
  bool help_requested_ = false;
};

// The start every subcommand shares: parses argv into `flags`; on a bad
// flag prints "<argv[0]>: <why>" to stderr and returns kExitUsage, on --help
// prints the usage to stdout and returns 0; otherwise nullopt: go on.
std::optional<int> ParseCommandLine(FlagSet& flags, int argc, char** argv);

}  // namespace llmc::cli

#endif  // LLMC_RUNTIME_CLI_FLAGS_H_
