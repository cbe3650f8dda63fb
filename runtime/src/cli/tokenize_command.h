// `tokenize`: the runtime's tokenizer from the command line. Private to
// runtime/src/cli; commands.cc lists it among the runtime's subcommands.
#ifndef LLMC_RUNTIME_SRC_CLI_TOKENIZE_COMMAND_H_
#define LLMC_RUNTIME_SRC_CLI_TOKENIZE_COMMAND_H_

#include <string_view>

namespace llmc::cli {

inline constexpr std::string_view kTokenizeSummary =
    "Print the token ids of TEXT (or, with --decode, the text of ids).";

// argv[0] is "<program> tokenize"; returns the process exit code.
int RunTokenizeCommand(int argc, char** argv);

}  // namespace llmc::cli

#endif  // LLMC_RUNTIME_SRC_CLI_TOKENIZE_COMMAND_H_
