// Pre-tokenizers of byte-level BPE: the regex splits that cut text into
// words before merges apply, written by hand (no regex engine) to give the
// same words as llama.cpp for each `tokenizer.ggml.pre` family. Public so
// that the splits can be tested and inspected on their own; Tokenizer picks
// the right one from the model file.
#ifndef LLMC_RUNTIME_TOKENIZER_PRE_TOKENIZER_H_
#define LLMC_RUNTIME_TOKENIZER_PRE_TOKENIZER_H_

#include <string>
#include <string_view>
#include <vector>

namespace llmc {

enum class PreTokenizer {
  // llama.cpp's fallback chain for BPE files without a known `pre`:
  //   [\p{P}$+<=>^~|]+  then GPT-2's regex, then \p{N}+, then [0-9][0-9][0-9]
  kDefault,
  // 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
  kGpt2,
  // Each \p{N} isolated, then GPT-2's regex (SmolLM, StarCoder).
  kDigitsThenGpt2,
  // (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
  //  ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
  kLlama3,
  // Llama 3's regex with \p{N} instead of \p{N}{1,3} (Qwen2).
  kQwen2,
};

const char* ToString(PreTokenizer p);

// Splits `text` into words. Input that is not valid UTF-8 is decoded as
// llama.cpp does (each bad byte becomes U+FFFD), so the words are always
// valid UTF-8 and their concatenation may differ from `text` there.
std::vector<std::string> PreTokenize(PreTokenizer p, std::string_view text);

}  // namespace llmc

#endif  // LLMC_RUNTIME_TOKENIZER_PRE_TOKENIZER_H_
