// When a sequence ends, and which of its text may be streamed out now.
//
// The engine feeds each generated token with the text the detokenizer
// produced for it; the checker
//   - ends on an end-of-sequence token (unless ignore_eos; the EOS token's
//     own text is not output), on a stop string, or after max_tokens tokens,
//     in that order of precedence for one token;
//   - finds stop strings across piece boundaries: the output ends before the
//     first stop string to complete in the text (the earliest end; among
//     stops ending at the same byte, the one that starts first), so the
//     result does not depend on how the text was cut into pieces;
//   - holds back a tail that could still become a stop string, and an
//     incomplete UTF-8 sequence at the end, so that text once handed out
//     never needs to be taken back and never splits a character. When the
//     sequence finishes, everything before the stop string is released.
//
// Matching is on bytes; stop strings are matched as given (not normalized).
#ifndef LLMC_RUNTIME_SAMPLE_STOP_CHECKER_H_
#define LLMC_RUNTIME_SAMPLE_STOP_CHECKER_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "llmc/runtime/sample/sampling_params.h"

namespace llmc {

enum class FinishReason {
  kNone,    // still running
  kStop,    // a stop string matched
  kLength,  // max_tokens reached (or the engine ended it: context full)
  kEos,     // an end-of-sequence token
  kAbort,   // the client aborted it
  kError,   // the engine failed it (the status says why)
};

// "none", "stop", "length", "eos", "abort", "error". OpenAI's finish_reason is "stop" for
// both kStop and kEos.
const char* ToString(FinishReason reason);

class StopChecker {
 public:
  // Text only: stop strings (empty ones are ignored), no token limit, no EOS.
  explicit StopChecker(std::vector<std::string> stop);
  // params.stop, params.max_tokens and params.ignore_eos; `eos_token_ids`
  // are the model's end-of-sequence tokens (and any extra stop tokens).
  StopChecker(const SamplingParams& params, std::vector<int32_t> eos_token_ids);

  // Feeds one generated token and its text. Returns the finish reason after
  // it; kNone: keep generating. Ignored once finished.
  FinishReason AppendToken(int32_t token, std::string_view text);
  // Feeds text alone (no token counting). Returns true once a stop string
  // has matched. Ignored once finished.
  bool AppendText(std::string_view text);
  // Ends the sequence for an outside reason (the context is full, the
  // request was cancelled): releases the held-back text. No-op when already
  // finished.
  void Finish(FinishReason reason);

  // The text that became safe to emit since the last call. The view is valid
  // until the next non-const call.
  std::string_view TakeReady();
  // The output so far, held-back tail included; once a stop string matched,
  // the final text, cut before it.
  std::string_view text() const { return text_; }

  bool finished() const { return reason_ != FinishReason::kNone; }
  FinishReason finish_reason() const { return reason_; }
  // The stop string that matched; empty unless finish_reason() is kStop.
  const std::string& matched_stop() const { return matched_stop_; }
  // Tokens fed through AppendToken, the EOS token included.
  int num_tokens() const { return num_tokens_; }

 private:
  std::vector<std::string> stop_;
  std::vector<int32_t> eos_token_ids_;
  int max_tokens_ = -1;
  bool ignore_eos_ = false;

  std::string text_;
  size_t ready_ = 0;    // text_[0, ready_) may be emitted
  size_t emitted_ = 0;  // text_[0, emitted_) was handed out
  FinishReason reason_ = FinishReason::kNone;
  std::string matched_stop_;
  int num_tokens_ = 0;
};

}  // namespace llmc

#endif  // LLMC_RUNTIME_SAMPLE_STOP_CHECKER_H_
