#include "merges.h"

#include <algorithm>
#include <queue>
#include <string>

#include "unicode.h"

namespace llmc::tokenizer_internal {
namespace {

// A doubly linked list of text spans over the input; merging a pair grows
// the left span and empties the right one.
struct Symbol {
  int prev;
  int next;
  size_t begin;
  size_t len;  // 0 once merged into its left neighbour
};

std::vector<Symbol> SplitCharacters(std::string_view text) {
  std::vector<Symbol> symbols;
  size_t offset = 0;
  while (offset < text.size()) {
    // Grouped by the lead byte's announced length, clamped to the text, as
    // llama.cpp does: invalid UTF-8 still yields whole-byte symbols.
    size_t len = std::min(Utf8SequenceLength(uint8_t(text[offset])), text.size() - offset);
    int index = int(symbols.size());
    symbols.push_back({index - 1, offset + len == text.size() ? -1 : index + 1, offset, len});
    offset += len;
  }
  return symbols;
}

// A candidate merge of two adjacent symbols. `size` is their combined length
// when the candidate was made; a candidate whose symbols changed since is
// stale and skipped.
template <typename Priority>
struct Bigram {
  int left;
  int right;
  Priority priority;
  size_t size;
};

bool IsCurrent(const std::vector<Symbol>& s, int left, int right, size_t size) {
  const Symbol& l = s[left];
  const Symbol& r = s[right];
  return l.len != 0 && r.len != 0 && l.next == right && l.len + r.len == size;
}

void Merge(std::vector<Symbol>& s, int left, int right) {
  Symbol& l = s[left];
  Symbol& r = s[right];
  l.len += r.len;
  r.len = 0;
  l.next = r.next;
  if (r.next >= 0) s[r.next].prev = left;
}

// Merges adjacent symbols, best candidate first, until no candidate is left:
// `consider(left, right)` queues the pair when its merge is a token. A
// popped candidate whose symbols changed since it was queued is stale.
template <typename Queue, typename Consider>
void MergeBest(std::vector<Symbol>& symbols, Queue& queue, const Consider& consider) {
  for (int i = 1; i < int(symbols.size()); ++i) consider(i - 1, i);
  while (!queue.empty()) {
    auto c = queue.top();
    queue.pop();
    if (!IsCurrent(symbols, c.left, c.right, c.size)) continue;
    Merge(symbols, c.left, c.right);
    consider(symbols[c.left].prev, c.left);
    consider(c.left, symbols[c.left].next);
  }
}

}  // namespace

void BpeEncodeWord(const Vocab& vocab, std::string_view word, std::vector<int32_t>* out) {
  if (vocab.ignore_merges) {
    if (int32_t id = vocab.Find(word); id >= 0) {
      out->push_back(id);
      return;
    }
  }
  std::vector<Symbol> symbols = SplitCharacters(word);
  using Candidate = Bigram<int32_t>;  // priority: merge rank, lower first
  auto later = [](const Candidate& a, const Candidate& b) {
    return a.priority > b.priority || (a.priority == b.priority && a.left > b.left);
  };
  std::priority_queue<Candidate, std::vector<Candidate>, decltype(later)> queue(later);
  auto text = [&](const Symbol& s) { return word.substr(s.begin, s.len); };
  auto consider = [&](int left, int right) {
    if (left < 0 || right < 0) return;
    auto it = vocab.merge_ranks.find(MergeKey(text(symbols[left]), text(symbols[right])));
    if (it == vocab.merge_ranks.end()) return;
    queue.push({left, right, it->second, symbols[left].len + symbols[right].len});
  };
  MergeBest(symbols, queue, consider);

  for (int i = symbols.empty() ? -1 : 0; i >= 0; i = symbols[i].next) {
    std::string_view piece = word.substr(symbols[i].begin, symbols[i].len);
    if (int32_t id = vocab.Find(piece); id >= 0) {
      out->push_back(id);
      continue;
    }
    // Only reachable with merges that produce non-tokens or characters
    // missing from the vocabulary; llama.cpp then emits whichever single
    // bytes of the encoded text happen to be tokens.
    for (char c : piece) {
      if (int32_t id = vocab.Find(std::string_view(&c, 1)); id >= 0) out->push_back(id);
    }
  }
}

void SpmEncode(const Vocab& vocab, std::string_view text, std::vector<int32_t>* out) {
  std::vector<Symbol> symbols = SplitCharacters(text);
  using Candidate = Bigram<float>;  // priority: score of the merged token, higher first
  auto later = [](const Candidate& a, const Candidate& b) {
    return a.priority < b.priority || (a.priority == b.priority && a.left > b.left);
  };
  std::priority_queue<Candidate, std::vector<Candidate>, decltype(later)> queue(later);
  auto consider = [&](int left, int right) {
    if (left < 0 || right < 0) return;
    size_t size = symbols[left].len + symbols[right].len;
    int32_t id = vocab.Find(text.substr(symbols[left].begin, size));
    if (id < 0) return;
    queue.push({left, right, vocab.scores[id], size});
  };
  MergeBest(symbols, queue, consider);

  for (int i = symbols.empty() ? -1 : 0; i >= 0; i = symbols[i].next) {
    std::string_view piece = text.substr(symbols[i].begin, symbols[i].len);
    if (int32_t id = vocab.Find(piece); id >= 0) {
      out->push_back(id);
      continue;
    }
    // Merged symbols are always tokens, so this is one character the
    // vocabulary lacks: spell it in byte tokens.
    for (char c : piece) {
      int32_t id = vocab.ByteToken(uint8_t(c));
      if (id < 0) id = vocab.unk_id;  // llama.cpp would throw here
      if (id >= 0) out->push_back(id);
    }
  }
}

}  // namespace llmc::tokenizer_internal
