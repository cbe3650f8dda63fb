// The two merge algorithms, applied to text that has been split out from
// special tokens (and, for BPE, pre-tokenized and byte-level encoded).
// Both follow llama.cpp's sessions step for step, so that ties and fallbacks
// resolve the same way.
//
// Internal to runtime/src/tokenizer.
#ifndef LLMC_RUNTIME_SRC_TOKENIZER_MERGES_H_
#define LLMC_RUNTIME_SRC_TOKENIZER_MERGES_H_

#include <cstdint>
#include <string_view>
#include <vector>

#include "vocab.h"

namespace llmc::tokenizer_internal {

// Byte-level BPE on one pre-tokenized, byte-level encoded word: starting from
// its characters, repeatedly merge the adjacent pair of lowest merge rank
// (leftmost on ties). A final symbol that is not a token falls back to the
// tokens of its single bytes, when they exist.
void BpeEncodeWord(const Vocab& vocab, std::string_view word, std::vector<int32_t>* out);

// SentencePiece-style BPE on text whose spaces are already ▁: repeatedly merge
// the adjacent pair whose concatenation is the token of highest score
// (leftmost on ties). Characters that end up as no token become their
// <0xXX> byte tokens (or UNK when the vocabulary has none).
void SpmEncode(const Vocab& vocab, std::string_view text, std::vector<int32_t>* out);

}  // namespace llmc::tokenizer_internal

#endif  // LLMC_RUNTIME_SRC_TOKENIZER_MERGES_H_
