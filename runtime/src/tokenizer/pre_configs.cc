#include "pre_configs.h"

#include "absl/strings/str_join.h"

namespace llmc::tokenizer_internal {
namespace {

using P = PreTokenizer;

// name, splitter, ignore_merges, add_bos, clean_spaces
constexpr PreTokenizerConfig kConfigs[] = {
    {"default", P::kDefault, false, false, true},
    {"gpt-2", P::kGpt2, false, false, true},
    {"gpt2", P::kGpt2, false, false, true},  // llmc's spelling of the same; llama.cpp knows "gpt-2"
    {"phi-2", P::kGpt2, false, false, true},
    {"mpt", P::kGpt2, false, false, true},
    {"olmo", P::kGpt2, false, false, true},
    {"llama3", P::kLlama3, true, true, true},
    {"llama-v3", P::kLlama3, true, true, true},
    {"llama-bpe", P::kLlama3, true, true, true},
    {"dbrx", P::kLlama3, false, false, true},
    {"smaug-bpe", P::kLlama3, false, false, true},
    {"smollm", P::kDigitsThenGpt2, false, false, false},
    {"starcoder", P::kDigitsThenGpt2, false, false, true},
    {"refact", P::kDigitsThenGpt2, false, false, true},
    {"codeshell", P::kDigitsThenGpt2, false, false, true},
    {"command-r", P::kDigitsThenGpt2, false, false, false},
    {"qwen2", P::kQwen2, false, false, false},
    {"deepseek-r1-qwen", P::kQwen2, false, false, false},
    {"stablelm2", P::kQwen2, false, false, true},
};

}  // namespace

const PreTokenizerConfig* FindPreTokenizerConfig(std::string_view name) {
  if (name.empty()) name = "default";
  for (const PreTokenizerConfig& c : kConfigs)
    if (c.name == name) return &c;
  return nullptr;
}

std::string KnownPreTokenizerNames() {
  std::vector<std::string> names;
  for (const PreTokenizerConfig& c : kConfigs) names.emplace_back(c.name);
  return absl::StrJoin(names, ", ");
}

}  // namespace llmc::tokenizer_internal
