#include "llmc/runtime/cli/flags.h"

#include "llmc/runtime/cli/commands.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace llmc::cli {

FlagSet::FlagSet(std::string usage, std::string description)
    : usage_(std::move(usage)), description_(std::move(description)) {}

void FlagSet::Add(Flag flag) { flags_.push_back(std::move(flag)); }

void FlagSet::AddString(std::string name, std::string* out, std::string help, char short_name) {
  Add({std::move(name), short_name, Kind::kString, out, std::move(help),
       out->empty() ? "" : absl::StrCat("\"", *out, "\"")});
}
void FlagSet::AddInt(std::string name, int64_t* out, std::string help, char short_name) {
  Add({std::move(name), short_name, Kind::kInt, out, std::move(help), absl::StrCat(*out)});
}
void FlagSet::AddDouble(std::string name, double* out, std::string help, char short_name) {
  Add({std::move(name), short_name, Kind::kDouble, out, std::move(help), absl::StrCat(*out)});
}
void FlagSet::AddBool(std::string name, bool* out, std::string help) {
  Add({std::move(name), 0, Kind::kBool, out, std::move(help), *out ? "true" : "false"});
}

const FlagSet::Flag* FlagSet::Find(const std::string& name) const {
  for (const Flag& f : flags_)
    if (f.name == name) return &f;
  return nullptr;
}

const FlagSet::Flag* FlagSet::FindShort(char c) const {
  for (const Flag& f : flags_)
    if (f.short_name != 0 && f.short_name == c) return &f;
  return nullptr;
}

absl::Status FlagSet::Assign(const Flag& flag, const std::string& value) const {
  auto bad = [&](const char* what) {
    return absl::InvalidArgumentError(
        absl::StrFormat("flag --%s expects %s, got '%s'", flag.name, what, value));
  };
  switch (flag.kind) {
    case Kind::kString:
      *static_cast<std::string*>(flag.out) = value;
      return absl::OkStatus();
    case Kind::kInt:
      if (!absl::SimpleAtoi(value, static_cast<int64_t*>(flag.out))) return bad("an integer");
      return absl::OkStatus();
    case Kind::kDouble:
      if (!absl::SimpleAtod(value, static_cast<double*>(flag.out))) return bad("a number");
      return absl::OkStatus();
    case Kind::kBool:
      if (value == "true" || value == "1") {
        *static_cast<bool*>(flag.out) = true;
      } else if (value == "false" || value == "0") {
        *static_cast<bool*>(flag.out) = false;
      } else {
        return bad("true or false");
      }
      return absl::OkStatus();
  }
  return absl::InternalError("unreachable flag kind");
}

absl::Status FlagSet::Parse(int argc, const char* const* argv) {
  positional_.clear();
  help_requested_ = false;
  bool flags_done = false;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (flags_done || arg.size() < 2 || arg[0] != '-') {
      positional_.push_back(std::move(arg));
      continue;
    }
    if (arg == "--") {
      flags_done = true;
      continue;
    }
    if (arg == "--help" || arg == "-h") {
      help_requested_ = true;
      return absl::OkStatus();
    }
    const Flag* flag = nullptr;
    std::string value;
    bool has_value = false;
    if (arg[1] == '-') {
      std::string name = arg.substr(2);
      if (size_t eq = name.find('='); eq != std::string::npos) {
        value = name.substr(eq + 1);
        name.resize(eq);
        has_value = true;
      }
      flag = Find(name);
      if (!flag && !has_value && name.rfind("no-", 0) == 0) {
        const Flag* negated = Find(name.substr(3));
        if (negated && negated->kind == Kind::kBool) {
          *static_cast<bool*>(negated->out) = false;
          continue;
        }
      }
      if (!flag) return absl::InvalidArgumentError(absl::StrFormat("unknown flag --%s", name));
    } else {
      if (arg.size() != 2 || !(flag = FindShort(arg[1])))
        return absl::InvalidArgumentError(absl::StrFormat("unknown flag %s", arg));
    }
    if (!has_value) {
      if (flag->kind == Kind::kBool) {
        value = "true";
      } else if (i + 1 < argc) {
        value = argv[++i];
      } else {
        return absl::InvalidArgumentError(absl::StrFormat("flag --%s needs a value", flag->name));
      }
    }
    if (auto st = Assign(*flag, value); !st.ok()) return st;
  }
  return absl::OkStatus();
}

std::string FlagSet::Usage() const {
  std::string out = absl::StrCat("usage: ", usage_, "\n\n", description_, "\n");
  if (!flags_.empty()) absl::StrAppend(&out, "\nflags:\n");
  for (const Flag& f : flags_) {
    std::string names = f.short_name ? absl::StrFormat("-%c, --%s", f.short_name, f.name)
                                     : absl::StrCat("    --", f.name);
    absl::StrAppendFormat(&out, "  %-26s %s", names, f.help);
    if (!f.default_text.empty()) absl::StrAppend(&out, " (default: ", f.default_text, ")");
    absl::StrAppend(&out, "\n");
  }
  return out;
}

std::optional<int> ParseCommandLine(FlagSet& flags, int argc, char** argv) {
  if (absl::Status st = flags.Parse(argc, argv); !st.ok()) {
    std::fprintf(stderr, "%s: %s\n", argv[0], std::string(st.message()).c_str());
    return kExitUsage;
  }
  if (flags.help_requested()) {
    std::fputs(flags.Usage().c_str(), stdout);
    return 0;
  }
  return std::nullopt;
}

}  // namespace llmc::cli
