#include "llmc/runtime/cli/commands.h"

#include <cstdio>
#include <string>

#include "absl/strings/str_format.h"
#include "run_command.h"
#include "tokenize_command.h"

namespace llmc::cli {
namespace {

// A subcommand whose interface is fixed by DESIGN.md but whose implementation
// lands with a later issue. It says so plainly and exits non-zero, so scripts
// never mistake it for success.
struct PlannedCommand {
  std::string_view name;
  std::string_view usage;
  std::string_view what;
  std::string_view arrives_with;
};

constexpr PlannedCommand kPlanned[] = {
    {"serve", "ARTIFACT [--port N]",
     "Serve an artifact over an OpenAI-compatible HTTP API with continuous batching.",
     "the serving milestone (scheduler, engine, HTTP server)"},
};

const PlannedCommand* FindPlanned(std::string_view name) {
  for (const auto& p : kPlanned)
    if (p.name == name) return &p;
  return nullptr;
}

// argv[0] is "<program> <name>".
int RunPlanned(int argc, char** argv) {
  std::string self = argv[0];
  std::string name = self.substr(self.rfind(' ') + 1);
  const PlannedCommand* p = FindPlanned(name);
  if (!p) return kExitUsage;
  bool help = false;
  for (int i = 1; i < argc; ++i)
    help |= std::string_view(argv[i]) == "--help" || std::string_view(argv[i]) == "-h";
  std::string text = absl::StrFormat(
      "usage: %s %s\n\n%s\n\nstatus: not implemented yet; arrives with %s.\n", self, p->usage,
      p->what, p->arrives_with);
  if (help) {
    std::fputs(text.c_str(), stdout);
    return 0;
  }
  std::fprintf(stderr, "%s: not implemented yet; arrives with %s.\n", self.c_str(),
               std::string(p->arrives_with).c_str());
  return kExitNotImplemented;
}

// The runtime's subcommands in the order `help` lists them: the built ones
// with their implementation, the rest as planned.
std::vector<Command> MakeRuntimeCommands() {
  std::vector<Command> out;
  auto planned = [&out](std::string_view name) {
    const PlannedCommand* p = FindPlanned(name);
    out.push_back({p->name, p->what, &RunPlanned});
  };
  out.push_back({"run", kRunSummary, &RunRunCommand});
  planned("serve");
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
