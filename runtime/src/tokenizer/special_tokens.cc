#include "special_tokens.h"

#include <cctype>

namespace llmc::tokenizer_internal {
namespace {

bool IsSpace(char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; }

// Cuts all occurrences of special token `id` out of the text fragment `f`,
// appending the resulting fragments to `out`.
void CutToken(const Vocab& vocab, int32_t id, std::string_view f, std::vector<Fragment>* out) {
  const std::string& token = vocab.tokens[id];
  const uint32_t attr = vocab.attrs[id];
  while (!f.empty()) {
    size_t at = f.find(token);
    if (at == std::string_view::npos) break;
    std::string_view left = f.substr(0, at);
    if (attr & kAttrLstrip)
      while (!left.empty() && IsSpace(left.back())) left.remove_suffix(1);
    if (!left.empty()) out->push_back({-1, left});
    out->push_back({id, {}});
    f.remove_prefix(at + token.size());
    if (attr & kAttrRstrip)
      while (!f.empty() && IsSpace(f.front())) f.remove_prefix(1);
  }
  if (!f.empty()) out->push_back({-1, f});
}

}  // namespace

std::vector<Fragment> SplitSpecialTokens(const Vocab& vocab, std::string_view text,
                                         bool parse_special) {
  std::vector<Fragment> fragments;
  if (text.empty()) return fragments;
  fragments.push_back({-1, text});
  std::vector<Fragment> next;
  for (int32_t id : vocab.special_tokens) {
    if (!parse_special && (vocab.attrs[id] & (kAttrControl | kAttrUnknown))) continue;
    next.clear();
    for (const Fragment& f : fragments) {
      if (f.token >= 0) {
        next.push_back(f);
      } else {
        CutToken(vocab, id, f.text, &next);
      }
    }
    fragments.swap(next);
  }
  return fragments;
}

}  // namespace llmc::tokenizer_internal
