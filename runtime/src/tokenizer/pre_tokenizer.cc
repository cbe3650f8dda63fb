#include "llmc/runtime/tokenizer/pre_tokenizer.h"

#include <cstdint>

#include "unicode.h"

namespace llmc {
namespace {

using tokenizer_internal::AppendUtf8;
using tokenizer_internal::CharClass;
using tokenizer_internal::Classify;
using tokenizer_internal::DecodeUtf8;

// A split in progress: the text as codepoints with their classes, and the
// pieces cut so far as [begin, end) codepoint ranges. Each stage re-cuts every
// piece independently, as llama.cpp applies its regex list one after another.
struct Text {
  std::vector<uint32_t> cps;
  std::vector<CharClass> classes;
};

struct Range {
  size_t begin;
  size_t end;
};

using Ranges = std::vector<Range>;

constexpr uint32_t kNoCodepoint = 0xFFFFFFFF;

// A view of one piece that reads as "no codepoint" outside it, so that the
// splitters can look ahead without bounds checks (llama.cpp's _get_cpt).
class PieceCursor {
 public:
  PieceCursor(const Text& text, Range r, Ranges* out)
      : text_(text), r_(r), out_(out), emitted_(r.begin) {}

  uint32_t cp(size_t i) const { return i >= r_.begin && i < r_.end ? text_.cps[i] : kNoCodepoint; }
  CharClass cls(size_t i) const {
    return i >= r_.begin && i < r_.end ? text_.classes[i] : CharClass{};
  }
  size_t begin() const { return r_.begin; }
  size_t end() const { return r_.end; }

  // Closes the word that runs from the previous cut to `pos`.
  void Cut(size_t pos) {
    if (pos > emitted_) out_->push_back({emitted_, pos});
    emitted_ = pos;
  }

 private:
  const Text& text_;
  Range r_;
  Ranges* out_;
  size_t emitted_;
};

char AsciiLower(uint32_t cp) {
  return cp >= 'A' && cp <= 'Z' ? char(cp + 32) : cp < 128 ? char(cp) : 0;
}

// Length of the English contraction ('s 't 're 've 'm 'll 'd) at `pos`, or 0.
// llama.cpp lower-cases with the full Unicode table for Llama 3; no non-ASCII
// codepoint lower-cases to one of these ASCII letters, so ASCII is enough.
size_t ContractionAt(const PieceCursor& p, size_t pos, bool ignore_case) {
  if (p.cp(pos) != '\'' || pos + 1 >= p.end()) return 0;
  auto lower = [&](uint32_t cp) { return ignore_case ? AsciiLower(cp) : cp < 128 ? char(cp) : 0; };
  char a = lower(p.cp(pos + 1));
  if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
  if (pos + 2 >= p.end()) return 0;
  char b = lower(p.cp(pos + 2));
  if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
  return 0;
}

bool IsOther(CharClass c) { return !(c.whitespace || c.letter() || c.number()) && c.present(); }

// \s+(?!\S)|\s+ on the whitespace run at `pos`: a run followed by more text
// leaves its last whitespace to prefix the next word. Returns the new
// position, or `pos` when there is no whitespace there.
size_t WhitespaceRun(const PieceCursor& p, size_t pos) {
  size_t n = 0;
  while (p.cls(pos + n).whitespace) ++n;
  if (n > 1 && p.cp(pos + n) != kNoCodepoint) return pos + n - 1;
  return pos + n;
}

// 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
void SplitGpt2(const Text& text, Range r, Ranges* out) {
  PieceCursor p(text, r, out);
  size_t pos = p.begin();
  while (pos < p.end()) {
    const uint32_t cp = p.cp(pos);
    if (size_t n = ContractionAt(p, pos, /*ignore_case=*/false)) {
      p.Cut(pos += n);
      continue;
    }
    // An optional leading space joins the letters/digits/symbols after it.
    const bool space = cp == ' ';
    CharClass c = space ? p.cls(pos + 1) : p.cls(pos);
    if (c.letter() || c.number() || IsOther(c)) {
      auto same_kind = [&](CharClass x) {
        return c.letter() ? x.letter() : c.number() ? x.number() : IsOther(x);
      };
      pos += space;
      while (same_kind(p.cls(pos))) ++pos;
      p.Cut(pos);
      continue;
    }
    size_t next = WhitespaceRun(p, pos);
    p.Cut(pos = next > pos ? next : pos + 1);
  }
}

// Llama 3's regex (max_digits 3) and Qwen2's (max_digits 1):
// (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,max}|
//  ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
void SplitLlama3Family(const Text& text, Range r, Ranges* out, size_t max_digits) {
  PieceCursor p(text, r, out);
  auto newline = [](uint32_t cp) { return cp == '\r' || cp == '\n'; };
  size_t pos = p.begin();
  while (pos < p.end()) {
    const uint32_t cp = p.cp(pos);
    const CharClass c = p.cls(pos);
    if (size_t n = ContractionAt(p, pos, /*ignore_case=*/true)) {
      p.Cut(pos += n);
      continue;
    }
    // [^\r\n\p{L}\p{N}]?\p{L}+ : letters, with one optional non-letter,
    // non-digit, non-newline prefix (a space, a quote, ...).
    if (!newline(cp) && !c.number() && (c.letter() || p.cls(pos + 1).letter())) {
      ++pos;
      while (p.cls(pos).letter()) ++pos;
      p.Cut(pos);
      continue;
    }
    // \p{N}{1,max}: a run of digits in groups of at most max_digits.
    if (c.number()) {
      size_t group_start = pos;
      while (p.cls(pos).number()) {
        if (++pos - group_start >= max_digits) {
          p.Cut(pos);
          group_start = pos;
        }
      }
      p.Cut(pos);
      continue;
    }
    // ' ?[^\s\p{L}\p{N}]+[\r\n]*'. As in llama.cpp, whether this alternative
    // applies looks at the class after an optional space, but requires the
    // current position (not that next one) to hold a codepoint.
    const bool space = cp == ' ';
    CharClass c2 = space ? p.cls(pos + 1) : c;
    if (!(c2.whitespace || c2.letter() || c2.number()) && c.present()) {
      pos += space;
      while (IsOther(p.cls(pos))) ++pos;
      while (newline(p.cp(pos))) ++pos;
      p.Cut(pos);
      continue;
    }
    // \s*[\r\n]+ : whitespace up to and including its last newline.
    size_t n = 0;
    size_t after_newline = 0;
    while (p.cls(pos + n).whitespace) {
      if (newline(p.cp(pos + n))) after_newline = pos + n + 1;
      ++n;
    }
    if (after_newline > 0) {
      p.Cut(pos = after_newline);
      continue;
    }
    size_t next = WhitespaceRun(p, pos);
    p.Cut(pos = next > pos ? next : pos + 1);
  }
}

// \p{N}
bool IsNumber(const Text& t, size_t i) { return t.classes[i].number(); }

// [\p{P}\$\+<=>\^~\|]
bool IsPunctuationOrOperator(const Text& t, size_t i) {
  const uint32_t cp = t.cps[i];
  return t.classes[i].punctuation() || cp == '$' || cp == '+' || cp == '<' || cp == '=' ||
         cp == '>' || cp == '^' || cp == '~' || cp == '|';
}

// A one-class regex, `[class]` (kRuns false) or `[class]+` (kRuns true),
// used the way llama.cpp uses std::regex for the simple expressions of a
// chain: the matches and the text between them all become pieces.
template <bool (*kMatch)(const Text&, size_t), bool kRuns>
void IsolateMatches(const Text& text, Range r, Ranges* out) {
  size_t gap_start = r.begin;
  size_t pos = r.begin;
  while (pos < r.end) {
    if (!kMatch(text, pos)) {
      ++pos;
      continue;
    }
    if (pos > gap_start) out->push_back({gap_start, pos});
    size_t match_end = pos + 1;
    if (kRuns)
      while (match_end < r.end && kMatch(text, match_end)) ++match_end;
    out->push_back({pos, match_end});
    pos = gap_start = match_end;
  }
  if (r.end > gap_start) out->push_back({gap_start, r.end});
}

// [0-9][0-9][0-9]: ASCII digit triples, leftmost first; what remains of a
// longer run stays with the text around it.
void IsolateDigitTriples(const Text& text, Range r, Ranges* out) {
  auto digit = [&](size_t i) { return i < r.end && text.cps[i] >= '0' && text.cps[i] <= '9'; };
  size_t gap_start = r.begin;
  size_t pos = r.begin;
  while (pos < r.end) {
    if (digit(pos) && digit(pos + 1) && digit(pos + 2)) {
      if (pos > gap_start) out->push_back({gap_start, pos});
      out->push_back({pos, pos + 3});
      pos = gap_start = pos + 3;
    } else {
      ++pos;
    }
  }
  if (r.end > gap_start) out->push_back({gap_start, r.end});
}

template <typename Stage>
Ranges Apply(const Text& text, const Ranges& in, Stage stage) {
  Ranges out;
  out.reserve(in.size() * 2);
  for (const Range& r : in) stage(text, r, &out);
  return out;
}

}  // namespace

const char* ToString(PreTokenizer p) {
  switch (p) {
    case PreTokenizer::kDefault:
      return "default";
    case PreTokenizer::kGpt2:
      return "gpt2";
    case PreTokenizer::kDigitsThenGpt2:
      return "digits+gpt2";
    case PreTokenizer::kLlama3:
      return "llama3";
    case PreTokenizer::kQwen2:
      return "qwen2";
  }
  return "?";
}

std::vector<std::string> PreTokenize(PreTokenizer p, std::string_view utf8) {
  Text text;
  text.cps = DecodeUtf8(utf8);
  text.classes.reserve(text.cps.size());
  for (uint32_t cp : text.cps) text.classes.push_back(Classify(cp));

  Ranges pieces;
  if (!text.cps.empty()) pieces.push_back({0, text.cps.size()});
  auto llama3 = [](const Text& t, Range r, Ranges* out) {
    SplitLlama3Family(t, r, out, /*max_digits=*/3);
  };
  auto qwen2 = [](const Text& t, Range r, Ranges* out) {
    SplitLlama3Family(t, r, out, /*max_digits=*/1);
  };
  switch (p) {
    case PreTokenizer::kDefault:
      pieces = Apply(text, pieces, IsolateMatches<IsPunctuationOrOperator, true>);
      pieces = Apply(text, pieces, SplitGpt2);
      pieces = Apply(text, pieces, IsolateMatches<IsNumber, true>);
      pieces = Apply(text, pieces, IsolateDigitTriples);
      break;
    case PreTokenizer::kGpt2:
      pieces = Apply(text, pieces, SplitGpt2);
      break;
    case PreTokenizer::kDigitsThenGpt2:
      pieces = Apply(text, pieces, IsolateMatches<IsNumber, false>);
      pieces = Apply(text, pieces, SplitGpt2);
      break;
    case PreTokenizer::kLlama3:
      pieces = Apply(text, pieces, llama3);
      break;
    case PreTokenizer::kQwen2:
      pieces = Apply(text, pieces, qwen2);
      break;
  }

  std::vector<std::string> words;
  words.reserve(pieces.size());
  for (const Range& r : pieces) {
    std::string& w = words.emplace_back();
    for (size_t i = r.begin; i < r.end; ++i) AppendUtf8(text.cps[i], &w);
  }
  return words;
}

}  // namespace llmc
