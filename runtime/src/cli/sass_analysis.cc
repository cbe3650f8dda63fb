#include "sass_analysis.h"

#include <algorithm>
#include <cctype>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace llmc::cli {
namespace {

bool IsBranch(absl::string_view cls) {
  return cls == "BRA" || cls == "BRX" || cls == "JMP" || cls == "JMX";
}

// "/*01a0*/" at the start of `line` (after blanks): its address, and `line`
// left after it. False for any other line (headers, encodings, labels).
bool TakeAddress(absl::string_view* line, int64_t* address) {
  absl::string_view s = absl::StripLeadingAsciiWhitespace(*line);
  if (s.size() < 5 || s.substr(0, 2) != "/*") return false;
  size_t close = s.find("*/");
  if (close == absl::string_view::npos || close == 2) return false;
  absl::string_view hex = s.substr(2, close - 2);
  uint64_t value = 0;
  for (char c : hex)
    if (!std::isxdigit(static_cast<unsigned char>(c))) return false;
  if (hex.size() > 12 || !absl::SimpleHexAtoi(hex, &value)) return false;
  *address = int64_t(value);
  *line = s.substr(close + 2);
  return true;
}

// A branch's target: a "0x1a0" operand (cuobjdump) or "`(.L_x_3)" (nvdisasm,
// resolved through `labels` later: returned in `label`). Negative or
// register targets (BRX R4 -0x10) stay unknown.
void ParseTarget(absl::string_view operands, int64_t* target, std::string* label) {
  size_t tick = operands.find("`(");
  if (tick != absl::string_view::npos) {
    size_t close = operands.find(')', tick);
    if (close != absl::string_view::npos) *label = std::string(operands.substr(tick + 2, close - tick - 2));
    return;
  }
  for (absl::string_view tok : absl::StrSplit(operands, absl::ByAnyChar(" ,"), absl::SkipEmpty())) {
    uint64_t value = 0;
    if (tok.size() > 2 && tok.substr(0, 2) == "0x" && absl::SimpleHexAtoi(tok.substr(2), &value))
      *target = int64_t(value);
  }
}

// One instruction line after its address: "  @!P0 LDG.E.128 R4, [R2.64] ;  /* 0x... */".
bool ParseInstruction(absl::string_view rest, int64_t address, SassInstruction* out,
                      std::string* label) {
  size_t comment = rest.find("/*");
  if (comment != absl::string_view::npos) rest = rest.substr(0, comment);
  size_t semi = rest.find(';');
  if (semi != absl::string_view::npos) rest = rest.substr(0, semi);
  rest = absl::StripAsciiWhitespace(rest);
  // Dual-issue braces of older architectures: "{ IADD ... }".
  if (!rest.empty() && rest.front() == '{') rest = absl::StripLeadingAsciiWhitespace(rest.substr(1));
  if (!rest.empty() && rest.back() == '}') rest = absl::StripTrailingAsciiWhitespace(rest.substr(0, rest.size() - 1));
  if (rest.empty()) return false;
  out->address = address;
  auto next_token = [&rest]() {
    size_t end = rest.find_first_of(" \t");
    absl::string_view tok = rest.substr(0, end);
    rest = end == absl::string_view::npos ? absl::string_view()
                                         : absl::StripLeadingAsciiWhitespace(rest.substr(end));
    return tok;
  };
  absl::string_view tok = next_token();
  if (tok.front() == '@') {
    out->predicate = std::string(tok);
    tok = next_token();
  }
  if (tok.empty() || !std::isupper(static_cast<unsigned char>(tok.front()))) return false;
  out->opcode = std::string(tok);
  out->operands = std::string(rest);
  if (IsBranch(OpcodeClass(out->opcode))) ParseTarget(rest, &out->target, label);
  return true;
}

// The trap after the last EXIT: an unpredicated `BRA` to itself. It and the
// NOPs after it are padding, never executed.
bool IsTrap(const SassInstruction& i) {
  return i.predicate.empty() && OpcodeClass(i.opcode) == "BRA" && i.target == i.address;
}

void Analyze(SassFunction* f) {
  std::vector<SassInstruction>& code = f->instructions;
  // Drop the padding: from the last trap on, when only NOPs follow it.
  size_t end = code.size();
  while (end > 0 && OpcodeClass(code[end - 1].opcode) == "NOP") --end;
  if (end > 0 && IsTrap(code[end - 1])) {
    f->padding = int64_t(code.size() - end + 1);
    code.resize(end - 1);
  }
  for (const SassInstruction& i : code) f->mix.Add(i);

  // Loops: one per backward-branch target, to its last back edge. An
  // unconditional jump from past the function's last unpredicated EXIT to
  // before it is no back edge: it returns from code ptxas laid out after
  // the end (a shuffle's BRA.DIV fallback) into the loop that left for it.
  int64_t last_exit = -1;
  for (const SassInstruction& i : code)
    if (i.predicate.empty() && OpcodeClass(i.opcode) == "EXIT") last_exit = i.address;
  auto returns = [&](const SassInstruction& i) {
    return i.predicate.empty() && last_exit >= 0 && i.address > last_exit && i.target < last_exit;
  };
  std::map<int64_t, int64_t> loop_end;  // start -> end
  for (const SassInstruction& i : code)
    if (i.target >= 0 && i.target <= i.address && IsBranch(OpcodeClass(i.opcode)) && !returns(i)) {
      int64_t& e = loop_end[i.target];
      e = std::max(e, i.address);
    }
  for (const auto& [start, last] : loop_end) {
    SassLoop loop;
    loop.start = start;
    loop.end = last;
    for (const SassInstruction& i : code)
      if (i.address >= start && i.address <= last) loop.mix.Add(i);
    f->loops.push_back(std::move(loop));
  }
  for (SassLoop& a : f->loops)
    for (const SassLoop& b : f->loops) {
      if (&a == &b) continue;
      if (b.start <= a.start && a.end <= b.end) ++a.depth;        // b contains a
      if (a.start <= b.start && b.end <= a.end) a.innermost = false;  // a contains b
    }
  auto largest_innermost = [&](int other) {
    int best = -1;
    for (size_t i = 0; i < f->loops.size(); ++i) {
      const SassLoop& l = f->loops[i];
      if (l.innermost && int(i) != other &&
          (best < 0 || l.mix.instructions > f->loops[size_t(best)].mix.instructions))
        best = int(i);
    }
    return best;
  };
  f->hot_loop = largest_innermost(-1);
  if (f->hot_loop >= 0) f->next_loop = largest_innermost(f->hot_loop);
  for (const SassInstruction& i : code) {
    bool inside = false;
    for (const SassLoop& l : f->loops) inside |= i.address >= l.start && i.address <= l.end;
    f->outside_loops += !inside;
  }
}

}  // namespace

absl::string_view OpcodeClass(absl::string_view opcode) { return opcode.substr(0, opcode.find('.')); }

int AccessBytes(absl::string_view opcode) {
  int bytes = 4;
  std::vector<absl::string_view> parts = absl::StrSplit(opcode, '.');
  for (size_t i = 1; i < parts.size(); ++i) {
    absl::string_view p = parts[i];
    if (p == "256") bytes = 32;
    else if (p == "128") bytes = 16;
    else if (p == "64") bytes = 8;
    else if (p == "U16" || p == "S16") bytes = 2;
    else if (p == "U8" || p == "S8") bytes = 1;
  }
  return bytes;
}

void InstructionMix::Add(const SassInstruction& inst) {
  ++instructions;
  absl::string_view cls = OpcodeClass(inst.opcode);
  ++by_class[std::string(cls)];
  int bytes = AccessBytes(inst.opcode);
  if (cls == "LDG" || cls == "LDGSTS") {
    ++global_loads[bytes];
    global_load_bytes += bytes;
  } else if (cls == "STG") {
    ++global_stores[bytes];
    global_store_bytes += bytes;
  } else if (cls == "LDS") {
    ++shared_loads[bytes];
  } else if (cls == "STS") {
    ++shared_stores[bytes];
  }
}

absl::StatusOr<std::vector<SassFunction>> ParseSass(absl::string_view text) {
  std::vector<SassFunction> functions;
  std::map<std::string, int64_t> labels;  // nvdisasm's ".L_x_3" -> address
  std::vector<std::pair<size_t, std::string>> pending;  // instruction index -> label target
  std::vector<std::string> unplaced;  // labels waiting for their instruction
  auto finish = [&]() {
    if (functions.empty()) return;
    SassFunction& f = functions.back();
    for (auto& [index, label] : pending) {
      auto it = labels.find(label);
      if (it != labels.end()) f.instructions[index].target = it->second;
    }
    pending.clear();
    unplaced.clear();
    Analyze(&f);
  };
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    absl::string_view s = absl::StripAsciiWhitespace(line);
    int64_t address = 0;
    if (s.rfind("Function :", 0) == 0 || (s.rfind(".text.", 0) == 0 && s.back() == ':')) {
      finish();
      absl::string_view name = s.front() == 'F' ? s.substr(10) : s.substr(6, s.size() - 7);
      functions.emplace_back().name = std::string(absl::StripAsciiWhitespace(name));
      continue;
    }
    if (functions.empty()) continue;
    if (TakeAddress(&line, &address)) {
      SassInstruction inst;
      std::string label;
      if (!ParseInstruction(line, address, &inst, &label)) continue;
      for (std::string& l : unplaced) labels[l] = address;
      unplaced.clear();
      if (!label.empty()) pending.emplace_back(functions.back().instructions.size(), label);
      functions.back().instructions.push_back(std::move(inst));
    } else if (!s.empty() && s.back() == ':' && s.find(' ') == absl::string_view::npos) {
      unplaced.emplace_back(s.substr(0, s.size() - 1));  // a label: the next instruction's
    }
  }
  finish();
  functions.erase(std::remove_if(functions.begin(), functions.end(),
                                 [](const SassFunction& f) { return f.instructions.empty(); }),
                  functions.end());
  if (functions.empty())
    return absl::InvalidArgumentError("no SASS function with instructions in the text");
  return functions;
}

const SassFunction* FindSassFunction(const std::vector<SassFunction>& functions,
                                     absl::string_view name) {
  for (const SassFunction& f : functions)
    if (f.name == name) return &f;
  return nullptr;
}

std::string FormatWidths(const std::map<int, int64_t>& widths) {
  if (widths.empty()) return "-";
  std::vector<std::string> parts;
  for (auto it = widths.rbegin(); it != widths.rend(); ++it)
    parts.push_back(absl::StrCat(it->first, "Bx", it->second));
  return absl::StrJoin(parts, " ");
}

std::string FormatMix(const InstructionMix& mix, size_t top) {
  std::vector<std::pair<std::string, int64_t>> classes(mix.by_class.begin(), mix.by_class.end());
  std::stable_sort(classes.begin(), classes.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  std::vector<std::string> parts;
  int64_t rest = 0;
  for (size_t i = 0; i < classes.size(); ++i) {
    if (i < top)
      parts.push_back(absl::StrCat(classes[i].first, " ", classes[i].second));
    else
      rest += classes[i].second;
  }
  std::string out = absl::StrJoin(parts, ", ");
  if (rest > 0) absl::StrAppend(&out, ", +", rest, " more");
  return out;
}

}  // namespace llmc::cli
