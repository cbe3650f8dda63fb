//===- main.cpp - the llmc executable -------------------------------------===//
//
// `llmc compile` turns a model into an artifact; every other subcommand comes
// from the runtime (the same code as the runtime-only `llmc-rt`).
//
//===----------------------------------------------------------------------===//
#include "Driver/CompileCommand.h"
#include "llmc/runtime/cli/commands.h"

#include "llvm/Support/InitLLVM.h"

#include <vector>

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  std::vector<llmc::cli::Command> commands = {
      {"compile", "Compile a model (HF folder, .gguf or built-in) into IR, kernels and an artifact.",
       &llmc::runCompileCommand}};
  auto runtime = llmc::cli::RuntimeCommands();
  commands.insert(commands.end(), runtime.begin(), runtime.end());
  return llmc::cli::Dispatch("llmc", "llmc: a compiler and runtime for transformer language models.",
                             commands, argc, argv);
}
