// llmc-rt: the runtime-only executable. It links no LLVM or MLIR, so it can be
// deployed next to artifacts on serving machines; it runs every subcommand of
// `llmc` except those that compile. `llmc` execs it for those subcommands
// (argv[0] then ends in "llmc", and messages say "llmc run: ...").
#include <string_view>
#include <vector>

#include "llmc/runtime/cli/commands.h"

int main(int argc, char** argv) {
  auto runtime = llmc::cli::RuntimeCommands();
  std::vector<llmc::cli::Command> commands(runtime.begin(), runtime.end());
  std::string_view self = argc > 0 ? argv[0] : "llmc-rt";
  std::string_view base = self.substr(self.rfind('/') == std::string_view::npos ? 0 : self.rfind('/') + 1);
  const char* program = base == "llmc" ? "llmc" : "llmc-rt";
  return llmc::cli::Dispatch(program, "Runtime for llmc artifacts (no compiler linked).",
                             commands, argc, argv);
}
