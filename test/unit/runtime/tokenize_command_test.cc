// `tokenize` through the command dispatcher, on a tiny tokenizer.json folder
// (and the SmolLM2 GGUF when present): ids out, text back, flags, and the
// exit codes of each kind of error.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "llmc/runtime/cli/commands.h"

namespace llmc::cli {
namespace {

struct Result {
  int code;
  std::string out, err;
};

Result RunTokenize(std::vector<std::string> args) {
  args.insert(args.begin(), {"llmc-test", "tokenize"});
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  auto runtime = RuntimeCommands();
  std::vector<Command> commands(runtime.begin(), runtime.end());
  ::testing::internal::CaptureStdout();
  ::testing::internal::CaptureStderr();
  int code = Dispatch("llmc-test", "test", commands, int(argv.size()), argv.data());
  std::string out = ::testing::internal::GetCapturedStdout();
  std::string err = ::testing::internal::GetCapturedStderr();
  return {code, out, err};
}

// Byte-level BPE over a few characters, with ChatML special tokens and a
// ChatML chat template that inserts a system prompt.
class TokenizeCommand : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::path(::testing::TempDir()) /
        ("llmc_tokenize_command_" + std::to_string(::getpid()) + "_" +
         ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
    std::ofstream(dir_ / "tokenizer.json") << R"({
      "added_tokens": [{"id": 0, "content": "<|im_start|>", "special": true},
                       {"id": 1, "content": "<|im_end|>", "special": true}],
      "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "use_regex": true},
      "model": {"type": "BPE",
                "vocab": {"<|im_start|>": 0, "<|im_end|>": 1, "h": 2, "i": 3, "hi": 4, "Ġ": 5, "Ġhi": 6,
                          "Ċ": 7, "u": 8, "s": 9, "e": 10, "r": 11, "a": 12, "t": 13, "n": 14, "y": 15,
                          "m": 16, "<": 17, "|": 18, ">": 19, "_": 20},
                "merges": ["h i", "Ġ hi"]}})";
    std::ofstream(dir_ / "tokenizer_config.json") << R"({"eos_token": "<|im_end|>", "chat_template":
      "{% if messages[0]['role'] != 'system' %}{{ '<|im_start|>system\nhi<|im_end|>\n' }}{% endif %}{% for m in messages %}{{'<|im_start|>' + m['role'] + '\n' + m['content'] + '<|im_end|>\n'}}{% endfor %}"})";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string model() const { return dir_.string(); }
  std::filesystem::path dir_;
};

TEST_F(TokenizeCommand, PrintsIdsOnOneLine) {
  Result r = RunTokenize({model(), "hi hi"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "4 6\n");
}

TEST_F(TokenizeCommand, SpecialTokensUnlessNoSpecial) {
  EXPECT_EQ(RunTokenize({model(), "<|im_start|>hi"}).out, "0 4\n");
  EXPECT_EQ(RunTokenize({model(), "--no-special", "<|im_start|>hi"}).out,
            "17 18 3 16 20 9 13 12 11 13 18 19 4\n");
}

TEST_F(TokenizeCommand, DecodePrintsText) {
  EXPECT_EQ(RunTokenize({"--decode", model(), "0 4 6 1"}).out, "<|im_start|>hi hi<|im_end|>\n");
  EXPECT_EQ(RunTokenize({"--decode", "--no-special", model(), "0 4 6 1"}).out, "hi hi\n");
}

TEST_F(TokenizeCommand, ChatAppliesTheModelTemplate) {
  // <|im_start|>system\nhi<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n
  Result r = RunTokenize({"--chat", model(), "hi"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "0 9 15 9 13 10 16 7 4 1 7 0 8 9 10 11 7 4 1 7 0 12 9 9 3 9 13 12 14 13 7\n");
  // The plain ChatML template inserts no system prompt.
  r = RunTokenize({"--chat-template", "chatml", model(), "hi"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "0 8 9 10 11 7 4 1 7 0 12 9 9 3 9 13 12 14 13 7\n");
}

TEST_F(TokenizeCommand, ErrorsExitWithOneAndUsageErrorsWithTwo) {
  Result r = RunTokenize({(dir_ / "missing").string(), "hi"});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("missing: no such file or directory"), std::string::npos) << r.err;

  r = RunTokenize({"--decode", model(), "4 banana"});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("'banana' is not a token id"), std::string::npos) << r.err;

  r = RunTokenize({"--decode", model(), "4 21"});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("token id 21 is out of range (the vocabulary has 21 tokens)"),
            std::string::npos)
      << r.err;

  r = RunTokenize({"--chat-template", "vicuna", model(), "hi"});
  EXPECT_EQ(r.code, kExitUsage);
  EXPECT_NE(r.err.find("unknown chat template 'vicuna' (known: chatml, qwen3, llama3, phi3, gemma)"), std::string::npos)
      << r.err;

  r = RunTokenize({model()});
  EXPECT_EQ(r.code, kExitUsage);
  EXPECT_NE(r.err.find("expected MODEL and TEXT"), std::string::npos) << r.err;

  r = RunTokenize({"--frobnicate", model(), "hi"});
  EXPECT_EQ(r.code, kExitUsage);

  std::ofstream(dir_ / "tokenizer.json") << "{\"model\": 3}";
  r = RunTokenize({model(), "hi"});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("tokenizer.json: model must be an object, got a number"), std::string::npos)
      << r.err;
}

TEST(TokenizeCommandSmolLM2, MatchesLlamaCpp) {
  const char* home = std::getenv("HOME");
  std::string path =
      std::string(home ? home : "") + "/.cache/llmc/models/SmolLM2-135M-Instruct.Q4_1.gguf";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "SmolLM2 GGUF not found at " << path;
  // Ids from llama-cpp-python (test/data/tokenizer/smollm2_expected.jsonl, corpus id 0).
  EXPECT_EQ(RunTokenize({path, "Hello world"}).out, "19556 905\n");
  EXPECT_EQ(RunTokenize({"--decode", path, "19556 905"}).out, "Hello world\n");
}

}  // namespace
}  // namespace llmc::cli
