// llmc tokenize MODEL TEXT [--decode] [--no-bos] [--no-special] [--chat]
//                          [--chat-template NAME]
//
// MODEL is a .gguf file or a Hugging Face folder (tokenizer.json). Prints the
// ids of TEXT on one line, space-separated; with --decode, TEXT is such a
// line and the decoded text is printed. Exit codes: 0 success, 1 a failure
// (unreadable model, bad ids, no usable chat template), 2 bad usage.
#include "tokenize_command.h"

#include <sys/stat.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "llmc/runtime/cli/commands.h"
#include "llmc/runtime/cli/flags.h"
#include "llmc/core/format/gguf.h"
#include "llmc/runtime/tokenizer/chat_template.h"
#include "llmc/runtime/tokenizer/tokenizer.h"

namespace llmc::cli {
namespace {

constexpr int kExitFailure = 1;

struct Options {
  bool decode = false;
  bool bos = true;      // --no-bos turns it off
  bool special = true;  // --no-special turns it off
  bool chat = false;
  std::string chat_template;
};

absl::StatusOr<std::unique_ptr<Tokenizer>> LoadTokenizer(const std::string& model) {
  struct stat st;
  if (::stat(model.c_str(), &st) != 0)
    return absl::NotFoundError(absl::StrCat(model, ": no such file or directory"));
  if (S_ISDIR(st.st_mode)) return Tokenizer::FromHFFolder(model);
  absl::StatusOr<std::unique_ptr<GgufFile>> gguf = GgufFile::Open(model);
  if (!gguf.ok()) return gguf.status();
  return Tokenizer::FromGguf(**gguf);
}

// "12 345 7" (spaces, tabs, newlines or commas between ids) -> ids.
absl::StatusOr<std::vector<int32_t>> ParseIds(const std::string& text, int64_t vocab_size) {
  std::vector<int32_t> ids;
  for (absl::string_view field :
       absl::StrSplit(text, absl::ByAnyChar(" \t\n\r,"), absl::SkipEmpty())) {
    int64_t id = 0;
    if (!absl::SimpleAtoi(field, &id))
      return absl::InvalidArgumentError(absl::StrCat("'", field, "' is not a token id"));
    if (id < 0 || id >= vocab_size) {
      return absl::OutOfRangeError(absl::StrCat(
          "token id ", id, " is out of range (the vocabulary has ", vocab_size, " tokens)"));
    }
    ids.push_back(int32_t(id));
  }
  return ids;
}

int Fail(const std::string& self, const absl::Status& status, int code = kExitFailure) {
  std::fprintf(stderr, "%s: %s\n", self.c_str(), std::string(status.message()).c_str());
  return code;
}

}  // namespace

int RunTokenizeCommand(int argc, char** argv) {
  const std::string self = argv[0];
  Options opt;
  FlagSet flags(absl::StrCat(self, " MODEL TEXT [flags]"),
                "Print the token ids of TEXT, space-separated on one line, as the model's "
                "tokenizer gives them\n"
                "(the same ids as llama.cpp). MODEL is a .gguf file or a Hugging Face folder with "
                "tokenizer.json.\n"
                "Use -- before a TEXT that starts with '-'.");
  flags.AddBool("decode", &opt.decode,
                "TEXT is token ids (space-separated); print their text instead");
  flags.AddBool("bos", &opt.bos, "add the BOS token when the model asks for one (--no-bos: never)");
  flags.AddBool("special", &opt.special,
                "text like <|im_start|> is that special token; with --decode, print special tokens "
                "(--no-special: plain text / hide them)");
  flags.AddBool("chat", &opt.chat, "TEXT is a user message: apply the model's chat template first");
  flags.AddString(
      "chat-template", &opt.chat_template,
      "with --chat, use this built-in template instead of the model's (chatml, qwen3, llama3, phi3, gemma)");
  if (absl::Status st = flags.Parse(argc, argv); !st.ok()) {
    std::fprintf(stderr, "%s: %s\n\n%s", self.c_str(), std::string(st.message()).c_str(),
                 flags.Usage().c_str());
    return kExitUsage;
  }
  if (flags.help_requested()) {
    std::fputs(flags.Usage().c_str(), stdout);
    return 0;
  }
  auto usage_error = [&](const std::string& why) {
    std::fprintf(stderr, "%s: %s\n\n%s", self.c_str(), why.c_str(), flags.Usage().c_str());
    return kExitUsage;
  };
  if (flags.positional().size() != 2) return usage_error("expected MODEL and TEXT");
  if (!opt.chat_template.empty()) opt.chat = true;
  if (opt.decode && opt.chat) return usage_error("--decode and --chat do not go together");

  // Resolve a named template before loading the model: a typo is a usage error.
  absl::StatusOr<ChatTemplate> named_template = ChatTemplate{};
  if (!opt.chat_template.empty()) {
    named_template = ChatTemplateByName(opt.chat_template);
    if (!named_template.ok()) return usage_error(std::string(named_template.status().message()));
  }

  const std::string& model = flags.positional()[0];
  const std::string& text = flags.positional()[1];
  absl::StatusOr<std::unique_ptr<Tokenizer>> tok = LoadTokenizer(model);
  if (!tok.ok()) return Fail(self, tok.status());
  const Tokenizer& tokenizer = **tok;

  if (opt.decode) {
    absl::StatusOr<std::vector<int32_t>> ids = ParseIds(text, tokenizer.vocab_size());
    if (!ids.ok()) return Fail(self, ids.status());
    std::string decoded = tokenizer.Decode(*ids, /*render_special=*/opt.special);
    std::fwrite(decoded.data(), 1, decoded.size(), stdout);
    std::fputc('\n', stdout);
    return 0;
  }

  std::string input = text;
  bool add_bos = opt.bos;
  if (opt.chat) {
    absl::StatusOr<ChatTemplate> tmpl =
        opt.chat_template.empty() ? DetectChatTemplate(tokenizer.chat_template()) : named_template;
    if (!tmpl.ok()) return Fail(self, tmpl.status());
    // A template that writes BOS itself uses the model's BOS text, and the
    // tokenizer must not add a second one.
    if (!tmpl->bos_token.empty() && tokenizer.bos_id() >= 0)
      tmpl->bos_token = tokenizer.TokenText(tokenizer.bos_id());
    std::vector<ChatMessage> messages = {{"user", text}};
    input = ApplyChatTemplate(*tmpl, messages, /*add_generation_prompt=*/true);
    if (!tmpl->bos_token.empty() && input.rfind(tmpl->bos_token, 0) == 0) add_bos = false;
  }
  std::vector<int32_t> ids = tokenizer.Encode(input, add_bos, /*parse_special=*/opt.special);
  std::string line = absl::StrJoin(ids, " ");
  std::printf("%s\n", line.c_str());
  return 0;
}

}  // namespace llmc::cli
