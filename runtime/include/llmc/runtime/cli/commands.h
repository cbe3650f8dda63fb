// Subcommands of the `llmc` and `llmc-rt` executables. The runtime owns every
// subcommand that executes or reads an artifact; the compiler adds `compile`
// (and whatever else needs MLIR) in tools/llmc. Both executables dispatch
// through Dispatch(), so they print help and errors the same way.
#ifndef LLMC_RUNTIME_CLI_COMMANDS_H_
#define LLMC_RUNTIME_CLI_COMMANDS_H_

#include <span>
#include <string_view>
#include <vector>

#include "llmc/core/exit_codes.h"

namespace llmc::cli {

struct Command {
  std::string_view name;
  std::string_view summary;
  // argv[0] is "<program> <name>"; returns the process exit code.
  int (*run)(int argc, char** argv);
};

// The subcommands the runtime provides: run, serve, bench, perplexity,
// tokenize, inspect.
std::span<const Command> RuntimeCommands();

// Runs `program <command> args...`: prints the command list for no arguments
// or --help, a clear error for an unknown command.
int Dispatch(std::string_view program, std::string_view description,
             const std::vector<Command>& commands, int argc, char** argv);

}  // namespace llmc::cli

#endif  // LLMC_RUNTIME_CLI_COMMANDS_H_
