// Loading tokenizer.json / tokenizer_config.json: which pre-tokenizer a file
// maps to, BOS/EOS and the chat template from the config, the folder loader,
// and errors that name the file and the field.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "llmc/runtime/tokenizer/tokenizer.h"

namespace llmc {
namespace {

using nlohmann::json;
using Ids = std::vector<int32_t>;

constexpr char kLlama3Regex[] =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr char kQwen2Regex[] =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// A byte-level BPE tokenizer.json over the digits and a few letters, with
// the given pre-tokenizer.
json ByteLevelJson(json pre_tokenizer) {
  json vocab = json::object();
  int id = 0;
  for (const char* t : {"<|begin_of_text|>",
                        "<|end_of_text|>",
                        "0",
                        "1",
                        "2",
                        "3",
                        "4",
                        "5",
                        "6",
                        "7",
                        "8",
                        "9",
                        "12",
                        "123",
                        "a",
                        "b",
                        "ab",
                        "Ġ",
                        "Ġa",
                        "Ġab",
                        "Ċ"})
    vocab[t] = id++;
  return {{"added_tokens",
           {{{"id", 0}, {"content", "<|begin_of_text|>"}, {"special", true}},
            {{"id", 1}, {"content", "<|end_of_text|>"}, {"special", true}}}},
          {"pre_tokenizer", pre_tokenizer},
          {"decoder", {{"type", "ByteLevel"}}},
          {"model",
           {{"type", "BPE"}, {"vocab", vocab}, {"merges", {"1 2", "12 3", "Ġ a", "a b", "Ġa b"}}}}};
}

json ByteLevel(bool use_regex) {
  return {{"type", "ByteLevel"},
          {"add_prefix_space", false},
          {"trim_offsets", true},
          {"use_regex", use_regex}};
}
json Split(const char* regex) {
  return {{"type", "Split"},
          {"pattern", {{"Regex", regex}}},
          {"behavior", "Isolated"},
          {"invert", false}};
}
json Sequence(std::vector<json> steps) { return {{"type", "Sequence"}, {"pretokenizers", steps}}; }

absl::StatusOr<std::unique_ptr<Tokenizer>> Load(const json& j, const std::string& config = "") {
  return Tokenizer::FromTokenizerJson(j.dump(), "m/tokenizer.json", config);
}

TEST(TokenizerJson, RecognisesThePreTokenizers) {
  struct Case {
    json pre;
    const char* name;
    Ids ids_123456;
  };
  std::vector<Case> cases = {
      {ByteLevel(true), "gpt-2", {13, 6, 7, 8}},  // "123" + "456" unmerged: \p{N}+ is one word
      {Sequence({{{"type", "Digits"}, {"individual_digits", true}}, ByteLevel(true)}),
       "smollm",
       {3, 4, 5, 6, 7, 8}},
      {Sequence({Split(kLlama3Regex), ByteLevel(false)}), "llama-bpe", {13, 6, 7, 8}},
      {Sequence({Split(kQwen2Regex), ByteLevel(false)}), "qwen2", {3, 4, 5, 6, 7, 8}},
  };
  for (const Case& c : cases) {
    auto tok = Load(ByteLevelJson(c.pre));
    ASSERT_TRUE(tok.ok()) << c.name << ": " << tok.status();
    EXPECT_EQ((*tok)->pre_tokenizer(), c.name);
    EXPECT_EQ((*tok)->Encode("123456", false, false), c.ids_123456) << c.name;
    EXPECT_EQ((*tok)->Encode(" ab\n", false, false), (Ids{19, 20})) << c.name;
  }
}

TEST(TokenizerJson, Llama3AddsBosFromThePostProcessor) {
  json j = ByteLevelJson(Sequence({Split(kLlama3Regex), ByteLevel(false)}));
  j["post_processor"] = {{"type", "Sequence"},
                         {"processors",
                          {{{"type", "ByteLevel"}},
                           {{"type", "TemplateProcessing"},
                            {"single",
                             {{{"SpecialToken", {{"id", "<|begin_of_text|>"}, {"type_id", 0}}}},
                              {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}}}}}};
  auto tok = Load(j);
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_TRUE((*tok)->add_bos());
  EXPECT_EQ((*tok)->bos_id(), 0);
  EXPECT_EQ((*tok)->Encode("ab", true, false), (Ids{0, 16}));
  EXPECT_EQ((*tok)->Encode("<|begin_of_text|>ab", false, true), (Ids{0, 16}));
}

TEST(TokenizerJson, ConfigGivesBosEosAndChatTemplate) {
  json config = {{"bos_token", {{"content", "<|begin_of_text|>"}, {"special", true}}},
                 {"eos_token", "<|end_of_text|>"},
                 {"add_bos_token", true},
                 {"chat_template", "{{ '<|im_start|>' }}"}};
  auto tok = Load(ByteLevelJson(ByteLevel(true)), config.dump());
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_EQ((*tok)->bos_id(), 0);
  EXPECT_EQ((*tok)->eos_id(), 1);
  EXPECT_TRUE((*tok)->add_bos());
  EXPECT_TRUE((*tok)->IsEndOfGeneration(1));
  EXPECT_EQ((*tok)->chat_template(), "{{ '<|im_start|>' }}");
  EXPECT_EQ((*tok)->Encode("ab", true, false), (Ids{0, 16}));

  json named = {
      {"chat_template",
       {{{"name", "tool_use"}, {"template", "T"}}, {{"name", "default"}, {"template", "D"}}}}};
  tok = Load(ByteLevelJson(ByteLevel(true)), named.dump());
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_EQ((*tok)->chat_template(), "D");
}

TEST(TokenizerJson, FolderLoaderReadsAllThreeFiles) {
  std::filesystem::path dir = std::filesystem::path(::testing::TempDir()) /
        ("llmc_tokenizer_folder_" + std::to_string(::getpid()) + "_" +
         ::testing::UnitTest::GetInstance()->current_test_info()->name());
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "tokenizer.json") << ByteLevelJson(ByteLevel(true)).dump();
  std::ofstream(dir / "tokenizer_config.json") << json{{"eos_token", "<|end_of_text|>"}}.dump();
  std::ofstream(dir / "chat_template.jinja") << "{{ '<|start_header_id|><|end_header_id|>' }}";
  auto tok = Tokenizer::FromHFFolder(dir.string());
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_EQ((*tok)->eos_id(), 1);
  EXPECT_EQ((*tok)->chat_template(), "{{ '<|start_header_id|><|end_header_id|>' }}");

  auto missing = Tokenizer::FromHFFolder((dir / "nope").string());
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("nope/tokenizer.json"), std::string::npos)
      << missing.status();
  std::filesystem::remove_all(dir);
}

// The error for `j` (as m/tokenizer.json) must contain `want`.
void ExpectError(const std::string& text, const std::string& want, const std::string& config = "") {
  auto tok = Tokenizer::FromTokenizerJson(text, "m/tokenizer.json", config);
  ASSERT_FALSE(tok.ok()) << "expected an error containing: " << want;
  EXPECT_NE(tok.status().message().find(want), std::string::npos) << tok.status();
}

TEST(TokenizerJson, ErrorsNameTheFileAndField) {
  ExpectError("{\"model\": ", "m/tokenizer.json: not valid JSON");
  ExpectError("[]", "m/tokenizer.json: (top level) must be an object, got an array");
  ExpectError("{}", "m/tokenizer.json: model is missing");
  ExpectError(R"({"model": {"type": "Unigram", "vocab": []}})",
              "m/tokenizer.json: model.type is 'Unigram'; llmc supports BPE tokenizers only");
  ExpectError(R"({"model": {"type": "BPE", "vocab": []}})",
              "m/tokenizer.json: model.vocab must be an object, got an array");
  ExpectError(R"({"model": {"vocab": {"a": "x"}}})",
              "model.vocab[\"a\"] must be an integer token id, got a string");
  ExpectError(R"({"model": {"vocab": {"a": -3}}})", "model.vocab[\"a\"] is -3, outside");
  ExpectError(R"({"model": {"vocab": {"a": 0, "b": 9000000}}})",
              "has token id 9000000 but only 2 entries");
  ExpectError(R"({"model": {"vocab": {"a": 0}, "merges": ["a a", 7]}})",
              "model.merges[1] must be a \"left right\" string");
  ExpectError(R"({"model": {"vocab": {"a": 0}, "merges": ["aa"]}})",
              "model.merges[0] 'aa' is not \"left right\"");
  ExpectError(R"({"added_tokens": [{"content": "x"}], "model": {"vocab": {"a": 0}}})",
              "added_tokens[0].id is missing");
  ExpectError(R"({"added_tokens": [{"id": 0, "content": "x"}], "model": {"vocab": {"a": 0}}})",
              "added_tokens gives id 0 to both 'a' and 'x'");
  ExpectError(R"({"model": {"vocab": {"a": 0}}})",
              "m/tokenizer.json: pre_tokenizer is neither byte-level");
  json bad_split = ByteLevelJson(Sequence({Split("\\w+"), ByteLevel(false)}));
  ExpectError(bad_split.dump(),
              "pre_tokenizer Split.pattern.Regex '\\w+' is not a regex llmc knows");
  json prefix = ByteLevelJson({{"type", "ByteLevel"}, {"add_prefix_space", true}});
  ExpectError(prefix.dump(), "pre_tokenizer.add_prefix_space is true");
  ExpectError(ByteLevelJson(ByteLevel(true)).dump(),
              "m/tokenizer_config.json: bos_token 'nope' is not in the vocabulary",
              R"({"bos_token": "nope"})");
  ExpectError(ByteLevelJson(ByteLevel(true)).dump(),
              "m/tokenizer_config.json: add_bos_token must be a boolean, got a string",
              R"({"add_bos_token": "yes"})");
}

}  // namespace
}  // namespace llmc
