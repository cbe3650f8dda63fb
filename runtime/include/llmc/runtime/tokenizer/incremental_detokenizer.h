// Streaming detokenization of generated tokens, one token at a time.
//
// Decoding the whole output again after every token (and diffing) costs
// O(n) per token, O(n^2) per sequence. This decodes a small window instead,
// the way Hugging Face's incremental decoding and vLLM's
// detokenize_incrementally do: the window starts a few tokens before the
// last text handed out, so that whatever Decode() does with a token's
// neighbours (SentencePiece's leading-space removal, llama.cpp's clean-up
// of spaces before punctuation) sees them; the new text is the window's
// decode past the part already handed out.
//
// A character whose bytes come from several tokens (byte-level BPE splits
// multibyte characters; SentencePiece falls back to <0xXX> byte tokens) is
// held back until its last byte arrives, so every piece is whole UTF-8
// characters (invalid bytes pass through once a later byte shows that they
// cannot become a character). The window grows only while bytes are held.
//
// The concatenated pieces equal Decode(context + tokens) past
// Decode(context), except where clean-up would remove a space that an
// earlier piece already ended with (as in vLLM); a trailing incomplete
// character is never returned.
#ifndef LLMC_RUNTIME_TOKENIZER_INCREMENTAL_DETOKENIZER_H_
#define LLMC_RUNTIME_TOKENIZER_INCREMENTAL_DETOKENIZER_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/types/span.h"
#include "llmc/runtime/tokenizer/tokenizer.h"

namespace llmc {

class IncrementalDetokenizer {
 public:
  // `context`: the tokens before the first appended one (the prompt); only
  // its last few are kept. `tokenizer` must outlive this object.
  IncrementalDetokenizer(const Tokenizer& tokenizer, absl::Span<const int32_t> context,
                         bool render_special = false);

  // Appends one token and returns the text that became final with it (may be
  // empty). The view is valid until the next call.
  std::string_view Append(int32_t token);

  // Tokens in the current window, for tests of the window's bound.
  size_t window_size() const { return ids_.size(); }

 private:
  // Tokens of context kept before the first output token (vLLM keeps 5).
  static constexpr size_t kContextTokens = 5;

  const Tokenizer& tokenizer_;
  bool render_special_;
  std::vector<int32_t> ids_;  // the window: context for the decode, then new tokens
  size_t read_ = 0;           // ids_[0, read_) is context whose text was handed out before
  size_t emitted_ = 0;        // bytes of Decode(ids_) already handed out
  std::string piece_;         // what the last Append returned
};

// Length of the longest prefix of `text` that does not end inside an
// unfinished UTF-8 character (bytes that could still be completed).
size_t CompleteUtf8Prefix(std::string_view text);

}  // namespace llmc

#endif  // LLMC_RUNTIME_TOKENIZER_INCREMENTAL_DETOKENIZER_H_
