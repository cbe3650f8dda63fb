// Per-request sampling settings, named and defaulted as llama.cpp's CLI and
// server name them (vLLM's SamplingParams has the same fields under the same
// names, except repeat_last_n, which vLLM lacks: it penalizes every prompt
// and output token, our repeat_last_n = -1, for the repetition penalty, and
// only the output tokens for the presence and frequency penalties).
#ifndef LLMC_RUNTIME_SAMPLE_SAMPLING_PARAMS_H_
#define LLMC_RUNTIME_SAMPLE_SAMPLING_PARAMS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace llmc {

// The most top-N logprobs a request may ask for (vLLM's default
// max_logprobs, OpenAI's top_logprobs limit).
inline constexpr int kMaxLogprobs = 20;

struct SamplingParams {
  // 0: greedy (argmax of the penalized logits, ties to the lowest id).
  float temperature = 0.8f;
  // Keep the k most likely tokens; 0 or negative: off.
  int top_k = 40;
  // Nucleus: keep the smallest set of most likely tokens whose probability
  // (after top-k) reaches top_p. 1: off.
  float top_p = 0.95f;
  // Keep tokens whose probability is at least min_p times the most likely
  // one's. 0: off.
  float min_p = 0.05f;
  // llama.cpp / CTRL repetition penalty: each distinct token among the last
  // repeat_last_n previous tokens has its logit divided by the penalty when
  // positive and multiplied by it when not. 1: off.
  float repetition_penalty = 1.0f;
  // How many previous tokens the penalties (repetition, presence and
  // frequency) look at, as llama.cpp's --repeat-last-n: 0 disables them, -1
  // uses all the previous tokens given to Sample() (the whole context: prompt
  // and output).
  int repeat_last_n = 64;
  // OpenAI's presence and frequency penalties, as llama.cpp's
  // --presence-penalty and --frequency-penalty: a token that occurs c > 0
  // times among the last repeat_last_n previous tokens has its logit lowered
  // by presence_penalty (once, whatever c) plus c * frequency_penalty, after
  // the repetition penalty. Negative values make repeats more likely. In
  // [-2, 2] as OpenAI's API; 0: off. vLLM counts only the output tokens for
  // these two; ours, like llama.cpp's, see the repeat_last_n window of
  // whatever previous tokens the caller gives Sample() (with -1 the prompt
  // too).
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  // Keys the sequence's draws (Philox-4x32-10, counter = the token's index
  // in the output): the same seed, logits and params give the same tokens
  // on any machine and in any batch. The engine picks a fresh seed for a
  // request that gave none.
  uint64_t seed = 0;
  // Most tokens to generate; -1: no limit (EOS, a stop string or the end of
  // the context ends the sequence).
  int max_tokens = 256;
  // Generation stops before the first occurrence of any of these in the
  // output text; the stop string itself is not returned.
  std::vector<std::string> stop;
  // Keep going after an end-of-sequence token.
  bool ignore_eos = false;
  // 0: no logprobs. N > 0: the logprob of the chosen token and of the N most
  // likely tokens, from the model's raw distribution (see SampleResult).
  int logprobs = 0;

  // Checks ranges; the error names the field at fault:
  // "sampling params: field 'top_p' must be in (0, 1], got 1.5".
  absl::Status Validate() const;
};

}  // namespace llmc

#endif  // LLMC_RUNTIME_SAMPLE_SAMPLING_PARAMS_H_
