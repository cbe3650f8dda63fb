#include "llmc/runtime/cli/commands.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace llmc::cli {
namespace {

int RunDispatch(std::vector<std::string> args) {
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  auto runtime = RuntimeCommands();
  std::vector<Command> commands(runtime.begin(), runtime.end());
  return Dispatch("llmc-test", "test", commands, int(argv.size()), argv.data());
}

TEST(Commands, RuntimeProvidesEveryPlannedSubcommand) {
  std::vector<std::string> names;
  for (const Command& c : RuntimeCommands()) names.emplace_back(c.name);
  EXPECT_EQ(names, (std::vector<std::string>{"run", "serve", "bench", "tune", "perplexity", "tokenize",
                                             "inspect", "logits"}));
}

TEST(Commands, ServeWithoutAnArtifactIsAUsageError) {
  testing::internal::CaptureStderr();
  EXPECT_EQ(RunDispatch({"llmc-test", "serve"}), kExitUsage);
  EXPECT_NE(testing::internal::GetCapturedStderr().find("expected one ARTIFACT"), std::string::npos);
  testing::internal::CaptureStderr();
  EXPECT_EQ(RunDispatch({"llmc-test", "serve", "model.llmc", "--port", "70000"}), kExitUsage);
  EXPECT_NE(testing::internal::GetCapturedStderr().find("--port must be in [0, 65535]"),
            std::string::npos);
}

TEST(Commands, HelpOfEachCommandSucceeds) {
  for (const Command& c : RuntimeCommands()) {
    testing::internal::CaptureStdout();
    EXPECT_EQ(RunDispatch({"llmc-test", std::string(c.name), "--help"}), 0) << c.name;
    std::string out = testing::internal::GetCapturedStdout();
    EXPECT_NE(out.find("usage: llmc-test " + std::string(c.name)), std::string::npos) << out;
  }
}

TEST(Commands, UnknownAndMissingCommandsAreUsageErrors) {
  testing::internal::CaptureStderr();
  EXPECT_EQ(RunDispatch({"llmc-test", "frobnicate"}), kExitUsage);
  EXPECT_NE(testing::internal::GetCapturedStderr().find("unknown command 'frobnicate'"),
            std::string::npos);
  testing::internal::CaptureStderr();
  EXPECT_EQ(RunDispatch({"llmc-test"}), kExitUsage);
  testing::internal::GetCapturedStderr();
}

}  // namespace
}  // namespace llmc::cli
