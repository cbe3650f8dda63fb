#include "llmc/runtime/cli/commands.h"

#include <cstdio>
#include <string>

#include "absl/strings/str_format.h"
#include "run_command.h"
#include "tokenize_command.h"

namespace llmc::cli {
namespace {

// The runtime's subcommands in the order `help` lists them.
std::vector<Command> MakeRuntimeCommands() {
  std::vector<Command> out;
  out.push_back({"run", kRunSummary, &RunRunCommand});
  out.push_back({"serve", kServeSummary, &RunServeCommand});
  out.push_back({"bench", kBenchSummary, &RunBenchCommand});
  out.push_back({"tune", kTuneSummary, &RunTuneCommand});
  out.push_back({"perplexity", kPerplexitySummary, &RunPerplexityCommand});
  out.push_back({"tokenize", kTokenizeSummary, &RunTokenizeCommand});
  out.push_back({"inspect", kInspectSummary, &RunInspectCommand});
  out.push_back({"logits", kLogitsSummary, &RunLogitsCommand});
  return out;
}

}  // namespace

std::span<const Command> RuntimeCommands() {
  static const std::vector<Command> commands = MakeRuntimeCommands();
  return commands;
}

int Dispatch(std::string_view program, std::string_view description,
             const std::vector<Command>& commands, int argc, char** argv) {
  auto print_help = [&](FILE* out) {
    std::fprintf(out, "usage: %.*s <command> [args] (see %.*s <command> --help)\n\n%.*s\n\ncommands:\n",
                 int(program.size()), program.data(), int(program.size()), program.data(),
                 int(description.size()), description.data());
    for (const Command& c : commands)
      std::fprintf(out, "  %-12.*s %.*s\n", int(c.name.size()), c.name.data(), int(c.summary.size()),
                   c.summary.data());
  };
  if (argc < 2) {
    print_help(stderr);
    return kExitUsage;
  }
  std::string_view sub = argv[1];
  if (sub == "--help" || sub == "-h" || sub == "help") {
    print_help(stdout);
    return 0;
  }
  for (const Command& c : commands) {
    if (c.name != sub) continue;
    // Re-root argv so the command sees "<program> <name>" as argv[0].
    std::string self = absl::StrFormat("%s %s", program, sub);
    std::vector<char*> args(argv + 1, argv + argc);
    args[0] = self.data();
    return c.run(int(args.size()), args.data());
  }
  std::fprintf(stderr, "%.*s: unknown command '%.*s'\n\n", int(program.size()), program.data(),
               int(sub.size()), sub.data());
  print_help(stderr);
  return kExitUsage;
}

}  // namespace llmc::cli
