// Splitting special and added tokens out of the text before the merge
// algorithms run, as llama.cpp's tokenizer_st_partition does.
//
// Internal to runtime/src/tokenizer.
#ifndef LLMC_RUNTIME_SRC_TOKENIZER_SPECIAL_TOKENS_H_
#define LLMC_RUNTIME_SRC_TOKENIZER_SPECIAL_TOKENS_H_

#include <cstdint>
#include <string_view>
#include <vector>

#include "vocab.h"

namespace llmc::tokenizer_internal {

// Either a special token already resolved to its id, or text still to be
// tokenized (a view into the caller's string).
struct Fragment {
  int32_t token = -1;  // >= 0 for a special token
  std::string_view text;
};

// Cuts every occurrence of the vocabulary's special tokens out of `text`,
// longest token first across the whole text. Control and unknown tokens are
// recognised only with `parse_special`; user-defined (added) tokens always.
// A token marked lstrip/rstrip also swallows the whitespace beside it.
std::vector<Fragment> SplitSpecialTokens(const Vocab& vocab, std::string_view text,
                                         bool parse_special);

}  // namespace llmc::tokenizer_internal

#endif  // LLMC_RUNTIME_SRC_TOKENIZER_SPECIAL_TOKENS_H_
