// `llmc run --prompts-file FILE.jsonl`: one request per line, each with its
// own sampling fields (vLLM / OpenAI names; a field left out takes the
// command line's value):
//
//   {"id": "q1", "prompt": "The capital of France is", "max_tokens": 16,
//    "temperature": 0, "seed": 7, "stop": ["\n"], "n": 2}
//   {"prompt_token_ids": [1, 415, 5565], "max_tokens": 8, "logprobs": 2}
//
// Fields: id (string or number; default the line number), prompt (text) or
// prompt_token_ids, max_tokens, temperature, top_k, top_p, min_p,
// repetition_penalty, repeat_last_n, seed, stop (string or list),
// ignore_eos, logprobs, n (completions of the prompt, seeds seed, seed+1,
// ...). Blank lines and lines starting with '#' are skipped. Anything else
// is an error naming the file, the line and the field.
#ifndef LLMC_RUNTIME_CLI_PROMPTS_FILE_H_
#define LLMC_RUNTIME_CLI_PROMPTS_FILE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "llmc/runtime/sample/sampling_params.h"

namespace llmc::cli {

struct PromptLine {
  std::string id;
  int64_t line = 0;  // 1-based
  std::optional<std::string> text;
  std::vector<int32_t> token_ids;  // when given instead of text
  SamplingParams params;
  int32_t n = 1;
};

// Parses the JSONL `contents` of `path` (for messages); `defaults` fills the
// fields a line leaves out.
absl::StatusOr<std::vector<PromptLine>> ParsePromptsFile(std::string_view path,
                                                         std::string_view contents,
                                                         const SamplingParams& defaults);

}  // namespace llmc::cli

#endif  // LLMC_RUNTIME_CLI_PROMPTS_FILE_H_
