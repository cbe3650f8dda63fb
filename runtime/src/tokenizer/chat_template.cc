#include "llmc/runtime/tokenizer/chat_template.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace llmc {
namespace {

constexpr char kLlama3Bos[] = "<|begin_of_text|>";
constexpr char kGemmaBos[] = "<bos>";

bool Contains(std::string_view haystack, std::string_view needle) {
  return haystack.find(needle) != std::string_view::npos;
}

// Jinja's `trim` filter (Python's str.strip()) for the whitespace that
// occurs in chat messages.
std::string_view Trim(std::string_view s) {
  constexpr std::string_view kSpace = " \t\n\r\f\v";
  size_t first = s.find_first_not_of(kSpace);
  if (first == std::string_view::npos) return {};
  return s.substr(first, s.find_last_not_of(kSpace) - first + 1);
}

// The value of a Jinja string literal body: \n, \t, \\, \' and \" escapes.
std::string UnescapeJinja(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '\\' || i + 1 == s.size()) {
      out.push_back(s[i]);
      continue;
    }
    char c = s[++i];
    out.push_back(c == 'n' ? '\n' : c == 't' ? '\t' : c);
  }
  return out;
}

// A ChatML template that inserts a default system message has it as one
// string literal: '<|im_start|>system\n...<|im_end|>'. Returns its text, or
// "" when the template has no such literal.
std::string DefaultSystemPrompt(std::string_view jinja) {
  constexpr std::string_view kOpen = "<|im_start|>system";
  for (size_t at = jinja.find(kOpen); at != std::string_view::npos;
       at = jinja.find(kOpen, at + 1)) {
    if (at == 0) continue;
    const char quote = jinja[at - 1];
    if (quote != '\'' && quote != '"') continue;
    std::string_view rest = jinja.substr(at + kOpen.size());
    if (rest.substr(0, 1) == "\n") {
      rest.remove_prefix(1);
    } else if (rest.substr(0, 2) == "\\n") {
      rest.remove_prefix(2);
    } else {
      continue;
    }
    size_t end = rest.find("<|im_end|>");
    if (end == std::string_view::npos) continue;
    std::string_view body = rest.substr(0, end);
    // It must all be inside the one literal (no closing quote, no Jinja).
    if (Contains(body, std::string_view(&quote, 1)) || Contains(body, "{{") || Contains(body, "{%"))
      continue;
    return UnescapeJinja(body);
  }
  return "";
}

std::string_view StripNewlines(std::string_view s, bool left, bool right) {
  while (left && !s.empty() && s.front() == '\n') s.remove_prefix(1);
  while (right && !s.empty() && s.back() == '\n') s.remove_suffix(1);
  return s;
}

// Qwen3's assistant turn (its Jinja, for a message without a separate
// reasoning_content): the reasoning is what precedes the first </think>,
// after the last <think> before it; the answer is what follows the last
// </think>. Turns after the last user message keep the reasoning when they
// have some or are the last message; earlier turns keep only the answer.
void AppendQwen3Assistant(std::string& out, std::string_view content, bool keep_reasoning,
                          bool last) {
  std::string_view reasoning;
  if (size_t close = content.find("</think>"); close != std::string_view::npos) {
    std::string_view before = StripNewlines(content.substr(0, close), false, true);
    if (size_t open = before.rfind("<think>"); open != std::string_view::npos)
      before.remove_prefix(open + 7);
    reasoning = StripNewlines(before, true, false);
    content = StripNewlines(content.substr(content.rfind("</think>") + 8), true, false);
  }
  out += "<|im_start|>assistant\n";
  if (keep_reasoning && (last || !reasoning.empty())) {
    out += "<think>\n";
    out += StripNewlines(reasoning, true, true);
    out += "\n</think>\n\n";
    out += StripNewlines(content, true, false);
  } else {
    out += content;
  }
  out += "<|im_end|>\n";
}

void AppendQwen3(std::string& out, absl::Span<const ChatMessage> messages) {
  // The last user message (Qwen3's last_query_index; no tool turns here).
  int last_query = int(messages.size()) - 1;
  for (int i = int(messages.size()) - 1; i >= 0; --i)
    if (messages[size_t(i)].role == "user") {
      last_query = i;
      break;
    }
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if (m.role == "assistant")
      AppendQwen3Assistant(out, m.content, int(i) > last_query, i + 1 == messages.size());
    else
      absl::StrAppend(&out, "<|im_start|>", m.role, "\n", m.content, "<|im_end|>\n");
  }
}

// Gemma has no system role: its templates (Gemma 3's; Gemma 2's refuses
// one) put the system text, then a blank line, at the start of the first
// user turn. The assistant speaks as "model"; turns' contents are trimmed.
void AppendGemma(std::string& out, absl::Span<const ChatMessage> messages) {
  std::string_view prefix;
  if (!messages.empty() && messages[0].role == "system") {
    prefix = messages[0].content;  // Gemma 3 trims the turns' contents, not this
    messages.remove_prefix(1);
  }
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    std::string_view content = Trim(m.content);
    absl::StrAppend(&out, "<start_of_turn>", m.role == "assistant" ? "model" : m.role, "\n");
    if (i == 0 && !prefix.empty())
      absl::StrAppend(&out, absl::string_view(prefix.data(), prefix.size()), "\n\n");
    absl::StrAppend(&out, absl::string_view(content.data(), content.size()), "<end_of_turn>\n");
  }
}

}  // namespace

const char* ToString(ChatTemplateKind kind) {
  switch (kind) {
    case ChatTemplateKind::kChatML:
      return "chatml";
    case ChatTemplateKind::kQwen3:
      return "qwen3";
    case ChatTemplateKind::kLlama3:
      return "llama3";
    case ChatTemplateKind::kPhi3:
      return "phi3";
    case ChatTemplateKind::kGemma:
      return "gemma";
  }
  return "?";
}

std::vector<std::string> KnownChatTemplateNames() {
  return {"chatml", "qwen3", "llama3", "phi3", "gemma"};
}

absl::StatusOr<ChatTemplate> ChatTemplateByName(std::string_view name) {
  ChatTemplate t;
  if (name == "chatml") {
    t.kind = ChatTemplateKind::kChatML;
  } else if (name == "qwen3") {
    t.kind = ChatTemplateKind::kQwen3;
  } else if (name == "llama3") {
    t.kind = ChatTemplateKind::kLlama3;
    t.bos_token = kLlama3Bos;
  } else if (name == "phi3") {
    t.kind = ChatTemplateKind::kPhi3;
  } else if (name == "gemma") {
    t.kind = ChatTemplateKind::kGemma;
    t.bos_token = kGemmaBos;
  } else {
    return absl::InvalidArgumentError(
        absl::StrFormat("unknown chat template '%s' (known: %s)", std::string(name),
                        absl::StrJoin(KnownChatTemplateNames(), ", ")));
  }
  return t;
}

absl::StatusOr<ChatTemplate> DetectChatTemplate(std::string_view jinja) {
  ChatTemplate t;
  if (Contains(jinja, "<|im_start|>")) {
    // llama.cpp sends these look-alikes elsewhere: Phi-4 separates role and
    // content with <|im_sep|>, SmolVLM ends turns with <end_of_utterance>.
    if (Contains(jinja, "<|im_sep|>") || Contains(jinja, "<end_of_utterance>"))
      return absl::UnimplementedError(
          "the model's chat template uses <|im_start|> but is not ChatML (Phi-4/SmolVLM style); "
          "llmc does not support it");
    // Qwen3 (and its MoE models) re-space or drop the reasoning of earlier
    // assistant turns.
    if (Contains(jinja, "</think>") && Contains(jinja, "reasoning_content")) {
      t.kind = ChatTemplateKind::kQwen3;
      return t;
    }
    t.kind = ChatTemplateKind::kChatML;
    t.default_system_prompt = DefaultSystemPrompt(jinja);
    return t;
  }
  if (Contains(jinja, "<|start_header_id|>") && Contains(jinja, "<|end_header_id|>")) {
    // Llama 3.1+ templates add a dated system message (and tool turns) that
    // the built-in Llama 3 rendering would silently leave out.
    if (Contains(jinja, "Cutting Knowledge Date"))
      return absl::UnimplementedError(
          "the model's chat template is Llama 3.1-style (it adds a dated system message), which "
          "llmc does not "
          "render; pass --chat-template llama3 for the Llama 3.0 format");
    t.kind = ChatTemplateKind::kLlama3;
    if (Contains(jinja, "bos_token")) t.bos_token = kLlama3Bos;
    return t;
  }
  // Phi-3: <|user|>\n...<|end|>\n turns (llama.cpp's test, too).
  if (Contains(jinja, "<|assistant|>") && Contains(jinja, "<|end|>")) {
    t.kind = ChatTemplateKind::kPhi3;
    return t;
  }
  if (Contains(jinja, "<start_of_turn>")) {
    t.kind = ChatTemplateKind::kGemma;
    if (Contains(jinja, "bos_token")) t.bos_token = kGemmaBos;
    return t;
  }
  if (jinja.empty())
    return absl::NotFoundError(
        absl::StrFormat("the model has no chat template; pass --chat-template NAME (known: %s)",
                        absl::StrJoin(KnownChatTemplateNames(), ", ")));
  return absl::UnimplementedError(absl::StrFormat(
      "the model's chat template is not one llmc recognises (it looks for <|im_start|> for chatml, "
      "<|start_header_id|>/<|end_header_id|> for llama3, <|assistant|>/<|end|> for phi3, "
      "<start_of_turn> for gemma); pass --chat-template NAME (known: %s)",
      absl::StrJoin(KnownChatTemplateNames(), ", ")));
}

std::string ApplyChatTemplate(const ChatTemplate& tmpl, absl::Span<const ChatMessage> messages,
                              bool add_generation_prompt, bool enable_thinking) {
  std::string out;
  switch (tmpl.kind) {
    case ChatTemplateKind::kChatML:
      if (!messages.empty() && messages[0].role != "system" && !tmpl.default_system_prompt.empty())
        absl::StrAppend(&out, "<|im_start|>system\n", tmpl.default_system_prompt, "<|im_end|>\n");
      for (const ChatMessage& m : messages)
        absl::StrAppend(&out, "<|im_start|>", m.role, "\n", m.content, "<|im_end|>\n");
      if (add_generation_prompt) absl::StrAppend(&out, "<|im_start|>assistant\n");
      break;
    case ChatTemplateKind::kQwen3:
      AppendQwen3(out, messages);
      if (add_generation_prompt) absl::StrAppend(&out, "<|im_start|>assistant\n");
      if (add_generation_prompt && !enable_thinking) absl::StrAppend(&out, "<think>\n\n</think>\n\n");
      break;
    case ChatTemplateKind::kLlama3:
      if (!messages.empty()) out += tmpl.bos_token;
      for (const ChatMessage& m : messages) {
        std::string_view content = Trim(m.content);
        absl::StrAppend(&out, "<|start_header_id|>", m.role, "<|end_header_id|>\n\n",
                        absl::string_view(content.data(), content.size()), "<|eot_id|>");
      }
      if (add_generation_prompt)
        absl::StrAppend(&out, "<|start_header_id|>assistant<|end_header_id|>\n\n");
      break;
    case ChatTemplateKind::kPhi3:
      for (const ChatMessage& m : messages)
        absl::StrAppend(&out, "<|", m.role, "|>\n", m.content, "<|end|>\n");
      if (add_generation_prompt) absl::StrAppend(&out, "<|assistant|>\n");
      break;
    case ChatTemplateKind::kGemma:
      if (!messages.empty()) out += tmpl.bos_token;
      AppendGemma(out, messages);
      if (add_generation_prompt) absl::StrAppend(&out, "<start_of_turn>model\n");
      break;
  }
  return out;
}

}  // namespace llmc
