#include "llmc/runtime/cli/flags.h"

#include <gtest/gtest.h>

#include <vector>

namespace llmc::cli {
namespace {

struct Parsed {
  std::string prompt;
  int64_t tokens = 16;
  double temperature = 0.8;
  bool chat = false;
};

absl::Status ParseArgs(FlagSet& flags, std::vector<const char*> args) {
  args.insert(args.begin(), "llmc run");
  return flags.Parse(int(args.size()), args.data());
}

FlagSet MakeFlags(Parsed& p) {
  FlagSet flags("llmc run ARTIFACT [flags]", "Generate text.");
  flags.AddString("prompt", &p.prompt, "prompt text", 'p');
  flags.AddInt("tokens", &p.tokens, "tokens to generate", 'n');
  flags.AddDouble("temperature", &p.temperature, "sampling temperature");
  flags.AddBool("chat", &p.chat, "apply the chat template");
  return flags;
}

TEST(FlagSet, ParsesEveryFormAndKeepsPositionals) {
  Parsed p;
  FlagSet flags = MakeFlags(p);
  ASSERT_TRUE(ParseArgs(flags, {"model.llmc", "-p", "hi there", "--tokens=32", "--temperature",
                                "0.25", "--chat", "extra"})
                  .ok());
  EXPECT_EQ(p.prompt, "hi there");
  EXPECT_EQ(p.tokens, 32);
  EXPECT_DOUBLE_EQ(p.temperature, 0.25);
  EXPECT_TRUE(p.chat);
  EXPECT_EQ(flags.positional(), (std::vector<std::string>{"model.llmc", "extra"}));
}

TEST(FlagSet, NegatedBoolAndDoubleDash) {
  Parsed p;
  p.chat = true;
  FlagSet flags = MakeFlags(p);
  ASSERT_TRUE(ParseArgs(flags, {"--no-chat", "--", "--not-a-flag"}).ok());
  EXPECT_FALSE(p.chat);
  EXPECT_EQ(flags.positional(), (std::vector<std::string>{"--not-a-flag"}));
}

TEST(FlagSet, ErrorsNameTheFlag) {
  Parsed p;
  FlagSet flags = MakeFlags(p);
  absl::Status st = ParseArgs(flags, {"--tokens=many"});
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("--tokens"), std::string::npos) << st;
  EXPECT_NE(st.message().find("many"), std::string::npos) << st;

  st = ParseArgs(flags, {"--bogus"});
  EXPECT_NE(st.message().find("unknown flag --bogus"), std::string::npos) << st;

  st = ParseArgs(flags, {"-p"});
  EXPECT_NE(st.message().find("--prompt needs a value"), std::string::npos) << st;

  st = ParseArgs(flags, {"--chat=maybe"});
  EXPECT_NE(st.message().find("true or false"), std::string::npos) << st;
}

TEST(FlagSet, HelpListsFlagsWithDefaults) {
  Parsed p;
  FlagSet flags = MakeFlags(p);
  ASSERT_TRUE(ParseArgs(flags, {"--help"}).ok());
  EXPECT_TRUE(flags.help_requested());
  std::string usage = flags.Usage();
  EXPECT_NE(usage.find("usage: llmc run ARTIFACT"), std::string::npos) << usage;
  EXPECT_NE(usage.find("-n, --tokens"), std::string::npos) << usage;
  EXPECT_NE(usage.find("(default: 16)"), std::string::npos) << usage;
}

}  // namespace
}  // namespace llmc::cli
