// libFuzzer target: the `llmc run --prompts-file` JSONL parser on arbitrary
// bytes must return requests or an error naming the line, never crash, hang
// or leak; every request it returns has valid sampling params and a prompt.
//
// Seeds: test/fuzz/corpus/prompts_file/.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "prompts_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto lines = llmc::cli::ParsePromptsFile("fuzz.jsonl", text, llmc::SamplingParams{});
  if (!lines.ok()) return 0;
  for (const llmc::cli::PromptLine& p : *lines) {
    if (!p.params.Validate().ok() || (!p.text && p.token_ids.empty()) || p.n < 1) std::abort();
  }
  return 0;
}
