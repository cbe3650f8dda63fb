// `llmc run --prompts-file`: see prompts_file.h for the file, run_command.cc
// for the flags.
#ifndef LLMC_RUNTIME_CLI_RUN_PROMPTS_FILE_H_
#define LLMC_RUNTIME_CLI_RUN_PROMPTS_FILE_H_

#include <string>

#include "llmc/runtime/cli/commands.h"
#include "llmc/runtime/engine/engine.h"

namespace llmc::cli {

struct PromptsFileRun {
  const char* self = "";
  std::string artifact;
  std::string path;    // the JSONL requests
  std::string output;  // JSONL results; empty or "-": stdout
  SamplingParams defaults;
  LoadOptions load;
  EngineOptions engine;
  bool quiet = false;  // no statistics on stderr
};

// Exit code: 0 when every request finished, 1 when one was refused or
// failed (its line says why), kExitUsage for a bad file.
int RunPromptsFile(const PromptsFileRun& run);

}  // namespace llmc::cli

#endif  // LLMC_RUNTIME_CLI_RUN_PROMPTS_FILE_H_
