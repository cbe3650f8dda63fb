#include "llmc/runtime/tokenizer/incremental_detokenizer.h"

#include <algorithm>

namespace llmc {

size_t CompleteUtf8Prefix(std::string_view text) {
  size_t n = text.size();
  for (size_t back = 1; back <= std::min<size_t>(4, n); ++back) {
    unsigned char c = static_cast<unsigned char>(text[n - back]);
    if ((c & 0xC0) == 0x80) continue;  // continuation byte: look further back
    size_t len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
    return back >= len ? n : n - back;
  }
  return n;  // only continuation bytes: nothing can complete them
}

IncrementalDetokenizer::IncrementalDetokenizer(const Tokenizer& tokenizer,
                                               absl::Span<const int32_t> context,
                                               bool render_special)
    : tokenizer_(tokenizer), render_special_(render_special) {
  // Keep a token that renders text, or SentencePiece's leading-space removal
  // would hit the first output token (Decode removes it from the first token
  // that renders text).
  size_t keep = std::min(context.size(), kContextTokens);
  while (keep < context.size() && tokenizer_.Decode(context.last(keep), render_special_).empty())
    ++keep;
  ids_.assign(context.end() - keep, context.end());
  read_ = ids_.size();
  // The context's text counts as shown, even an unfinished character at its end.
  emitted_ = tokenizer_.Decode(absl::MakeConstSpan(ids_), render_special_).size();
}

std::string_view IncrementalDetokenizer::Append(int32_t token) {
  ids_.push_back(token);
  std::string text = tokenizer_.Decode(absl::MakeConstSpan(ids_), render_special_);
  size_t ready = CompleteUtf8Prefix(text);
  piece_.clear();
  if (ready > emitted_) piece_.assign(text, emitted_, ready - emitted_);
  emitted_ = std::max(emitted_, ready);
  if (ready == text.size()) {
    // Nothing held back: the next window can start at the tokens whose text
    // was just handed out, the context the next token's decode needs; unless
    // they render nothing (control tokens), for the reason in the constructor.
    auto next = absl::MakeConstSpan(ids_).subspan(read_);
    std::string context = tokenizer_.Decode(next, render_special_);
    if (!context.empty()) {
      ids_.erase(ids_.begin(), ids_.begin() + std::ptrdiff_t(read_));
      emitted_ = context.size();
    }
    read_ = ids_.size();
  }
  return piece_;
}

}  // namespace llmc
