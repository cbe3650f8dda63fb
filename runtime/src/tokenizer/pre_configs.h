// The byte-level BPE families llmc recognises, keyed by GGUF's
// tokenizer.ggml.pre name: which splitter, and the flags llama.cpp sets for
// the family (llama-vocab.cpp, llama_vocab::impl::load).
//
// Internal to runtime/src/tokenizer.
#ifndef LLMC_RUNTIME_SRC_TOKENIZER_PRE_CONFIGS_H_
#define LLMC_RUNTIME_SRC_TOKENIZER_PRE_CONFIGS_H_

#include <string>
#include <string_view>

#include "llmc/runtime/tokenizer/pre_tokenizer.h"

namespace llmc::tokenizer_internal {

struct PreTokenizerConfig {
  std::string_view name;
  PreTokenizer pre;
  bool ignore_merges;  // a word that is a whole token skips the merges
  bool add_bos;        // default for add_bos_token when the file has none
  bool clean_spaces;   // Decode's clean-up of spaces before punctuation
};

// nullptr for a name llmc does not know. The empty name (a GGUF without
// tokenizer.ggml.pre) is llama.cpp's "default".
const PreTokenizerConfig* FindPreTokenizerConfig(std::string_view name);

// "default, gpt-2, llama-bpe, ..." for error messages.
std::string KnownPreTokenizerNames();

}  // namespace llmc::tokenizer_internal

#endif  // LLMC_RUNTIME_SRC_TOKENIZER_PRE_CONFIGS_H_
