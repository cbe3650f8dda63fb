//===- main.cpp - the llmc executable -------------------------------------===//
//
// `llmc compile` turns a model into an artifact; every other subcommand comes
// from the runtime (the same code as the runtime-only `llmc-rt`).
//
//===----------------------------------------------------------------------===//
#include "Driver/CompileCommand.h"
#include "llmc/runtime/cli/commands.h"

#include "llvm/Support/InitLLVM.h"

#include <climits>
#include <span>
#include <cstdlib>
#include <string>
#include <unistd.h>
#include <vector>

namespace {

// Runtime subcommands run in the `llmc-rt` next to this executable when there
// is one: that process maps no LLVM or MLIR, which keeps ~60 MiB of shared
// libraries out of the resident memory of `llmc run`, `bench` or `perplexity`
// (peak RSS of a run is then the same through either name). Falls back to
// the linked-in commands when llmc-rt is missing or LLMC_NO_EXEC_RT is set.
void execRuntimeIfPresent(int argc, char **argv,
                          std::span<const llmc::cli::Command> runtime) {
  if (argc < 2 || std::getenv("LLMC_NO_EXEC_RT"))
    return;
  std::string_view sub = argv[1];
  bool isRuntime = false;
  for (const llmc::cli::Command &c : runtime)
    isRuntime |= c.name == sub;
  if (!isRuntime)
    return;
  char self[PATH_MAX];
  ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0)
    return;
  std::string path(self, size_t(n));
  path = path.substr(0, path.rfind('/') + 1) + "llmc-rt";
  if (::access(path.c_str(), X_OK) != 0)
    return;
  // argv[0] stays "llmc...": llmc-rt then names itself llmc in messages.
  ::execv(path.c_str(), argv);
}

} // namespace

int main(int argc, char **argv) {
  auto runtime = llmc::cli::RuntimeCommands();
  execRuntimeIfPresent(argc, argv, runtime);
  llvm::InitLLVM init(argc, argv);
  std::vector<llmc::cli::Command> commands = {
      {"compile", "Compile a model (HF folder, .gguf or built-in) into IR, kernels and an artifact.",
       &llmc::runCompileCommand}};
  commands.insert(commands.end(), runtime.begin(), runtime.end());
  return llmc::cli::Dispatch("llmc", "llmc: a compiler and runtime for transformer language models.",
                             commands, argc, argv);
}
