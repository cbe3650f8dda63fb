#include "llmc/core/artifact/cuda_launch_expr.h"

#include "absl/strings/str_cat.h"

namespace llmc {
namespace {

// Integers stay within what a grid dimension or an int32 step count holds, so
// no evaluation overflows.
constexpr int64_t kMaxInt = (int64_t{1} << 31) - 1;

// A cursor over the expression text that skips spaces between tokens.
class Cursor {
 public:
  explicit Cursor(absl::string_view text) : text_(text) {}

  void SkipSpaces() {
    while (at_ < text_.size() && text_[at_] == ' ') ++at_;
  }
  bool Done() {
    SkipSpaces();
    return at_ == text_.size();
  }
  bool Eat(absl::string_view token) {
    SkipSpaces();
    if (text_.substr(at_, token.size()) != token) return false;
    at_ += token.size();
    return true;
  }
  // A variable name: the longest identifier at the cursor must be one.
  bool Var(LaunchVar* out) {
    SkipSpaces();
    size_t end = at_;
    while (end < text_.size() && ((text_[end] >= 'a' && text_[end] <= 'z') ||
                                  (text_[end] >= 'A' && text_[end] <= 'Z')))
      ++end;
    absl::string_view word = text_.substr(at_, end - at_);
    if (word == "T")
      *out = LaunchVar::kTokens;
    else if (word == "L")
      *out = LaunchVar::kLogits;
    else if (word == "splits")
      *out = LaunchVar::kSplits;
    else if (word == "Q")
      *out = LaunchVar::kQueries;
    else if (word == "S")
      *out = LaunchVar::kSeqs;
    else
      return false;
    at_ = end;
    return true;
  }
  // A decimal integer in [0, kMaxInt].
  bool Int(int64_t* out) {
    SkipSpaces();
    size_t start = at_;
    int64_t v = 0;
    while (at_ < text_.size() && text_[at_] >= '0' && text_[at_] <= '9') {
      v = v * 10 + (text_[at_++] - '0');
      if (v > kMaxInt) return false;
    }
    if (at_ == start) return false;
    *out = v;
    return true;
  }

 private:
  absl::string_view text_;
  size_t at_ = 0;
};

const char* VarName(LaunchVar v) {
  switch (v) {
    case LaunchVar::kTokens: return "T";
    case LaunchVar::kLogits: return "L";
    case LaunchVar::kSplits: return "splits";
    case LaunchVar::kQueries: return "Q";
    case LaunchVar::kSeqs: return "S";
    case LaunchVar::kConst: break;
  }
  return "?";
}

int64_t Value(LaunchVar var, const LaunchVars& v) {
  switch (var) {
    case LaunchVar::kTokens: return v.tokens;
    case LaunchVar::kLogits: return v.logits;
    case LaunchVar::kSplits: return v.splits;
    case LaunchVar::kQueries: return v.queries;
    case LaunchVar::kSeqs: return v.seqs;
    case LaunchVar::kConst: break;
  }
  return 0;
}

absl::Status Bad(absl::string_view text, absl::string_view expected) {
  return absl::InvalidArgumentError(absl::StrCat("'", text, "' is not ", expected));
}

}  // namespace

int64_t GridExpr::Evaluate(const LaunchVars& v) const {
  if (var == LaunchVar::kConst) return value;
  int64_t x = Value(var, v);
  if (cap > 0) return x < cap ? x : cap;
  return value <= 1 ? x : (x + value - 1) / value;
}

std::string GridExpr::ToString() const {
  if (var == LaunchVar::kConst) return absl::StrCat(value);
  if (cap > 0) return absl::StrCat("min(", VarName(var), ",", cap, ")");
  if (value <= 1) return VarName(var);
  return absl::StrCat("cdiv(", VarName(var), ",", value, ")");
}

bool WhenExpr::Holds(const LaunchVars& v) const {
  for (const WhenCond& c : all) {
    int64_t x = Value(c.var, v);
    if (c.less_equal ? x > c.bound : x <= c.bound) return false;
  }
  return true;
}

std::string WhenExpr::ToString() const {
  std::string out;
  for (const WhenCond& c : all)
    absl::StrAppend(&out, out.empty() ? "" : "&&", VarName(c.var), c.less_equal ? "<=" : ">",
                    c.bound);
  return out;
}

absl::StatusOr<GridExpr> ParseGridExpr(absl::string_view text) {
  constexpr absl::string_view kExpected =
      "a grid expression (a positive integer, T, L, Q, S, splits, cdiv(T|L|Q|S,<positive integer>) "
      "or min(T|L|Q|S|splits,<positive integer>))";
  Cursor c(text);
  GridExpr e;
  if (c.Int(&e.value)) {
    if (!c.Done()) return Bad(text, kExpected);
    if (e.value == 0) return absl::InvalidArgumentError(absl::StrCat("'", text, "' is 0"));
    return e;
  }
  if (c.Eat("cdiv")) {
    if (!c.Eat("(") || !c.Var(&e.var) || e.var == LaunchVar::kSplits || !c.Eat(",") ||
        !c.Int(&e.value) || !c.Eat(")") || !c.Done())
      return Bad(text, kExpected);
    if (e.value == 0) return absl::InvalidArgumentError(absl::StrCat("'", text, "' divides by 0"));
    return e;
  }
  if (c.Eat("min")) {
    if (!c.Eat("(") || !c.Var(&e.var) || !c.Eat(",") || !c.Int(&e.cap) || !c.Eat(")") ||
        !c.Done())
      return Bad(text, kExpected);
    if (e.cap == 0) return absl::InvalidArgumentError(absl::StrCat("'", text, "' caps at 0"));
    e.value = 1;
    return e;
  }
  if (!c.Var(&e.var) || !c.Done()) return Bad(text, kExpected);
  e.value = 1;
  return e;
}

absl::StatusOr<WhenExpr> ParseWhenExpr(absl::string_view text) {
  Cursor c(text);
  WhenExpr e;
  if (c.Done()) return e;
  do {
    WhenCond cond;
    if (!c.Var(&cond.var))
      return Bad(text, "a condition (T, L, Q, S or splits, then <= or >, then an integer)");
    if (c.Eat("<="))
      cond.less_equal = true;
    else if (c.Eat(">"))
      cond.less_equal = false;
    else
      return Bad(text, "a condition: the operator must be <= or >");
    if (!c.Int(&cond.bound))
      return Bad(text, "a condition: <= or > must be followed by a non-negative integer");
    e.all.push_back(cond);
  } while (c.Eat("&&"));
  if (!c.Done()) return Bad(text, "a condition: conditions are joined by &&");
  return e;
}

}  // namespace llmc
