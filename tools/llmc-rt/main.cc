// llmc-rt: the runtime-only executable. It links no LLVM or MLIR, so it can be
// deployed next to artifacts on serving machines; it runs every subcommand of
// `llmc` except those that compile.
#include <vector>

#include "llmc/runtime/cli/commands.h"

int main(int argc, char** argv) {
  auto runtime = llmc::cli::RuntimeCommands();
  std::vector<llmc::cli::Command> commands(runtime.begin(), runtime.end());
  return llmc::cli::Dispatch("llmc-rt", "Runtime for llmc artifacts (no compiler linked).",
                             commands, argc, argv);
}
