// Chat templates: turning a conversation into the prompt text a model was
// trained on. Models ship their template as Jinja (GGUF
// tokenizer.chat_template, tokenizer_config.json chat_template); llmc has no
// Jinja engine, so it recognises the template by its distinctive markers (as
// llama.cpp's llm_chat_detect_template does) and renders a built-in
// equivalent that produces the same text as the Jinja would.
//
// Known templates (Llama 3.1-style templates, which add a dated system
// message, are refused rather than rendered without it):
//   chatml  <|im_start|>ROLE\nCONTENT<|im_end|>\n per message; generation
//           prompt <|im_start|>assistant\n. Templates such as SmolLM2's and
//           Qwen2's insert a default system message when the conversation
//           does not start with one; detection keeps that text.
//   qwen3   chatml, with Qwen3's reasoning rule for assistant turns: their
//           "<think>...</think>" is cut out before the last user message
//           and kept (re-spaced: <think>\nR\n</think>\n\n) after it.
//           Recognised by </think> and reasoning_content in a ChatML template.
//   llama3  BOS, then <|start_header_id|>ROLE<|end_header_id|>\n\n
//           CONTENT (trimmed)<|eot_id|> per message; generation prompt
//           <|start_header_id|>assistant<|end_header_id|>\n\n.
//   phi3    <|ROLE|>\nCONTENT<|end|>\n per message; generation prompt
//           <|assistant|>\n. Recognised by <|assistant|> and <|end|>.
//   gemma   BOS, then <start_of_turn>ROLE\nCONTENT (trimmed)<end_of_turn>\n
//           with "model" for the assistant; a system message has no turn of
//           its own but opens the first user turn, followed by a blank line
//           (Gemma 3's template). Generation prompt <start_of_turn>model\n.
#ifndef LLMC_RUNTIME_TOKENIZER_CHAT_TEMPLATE_H_
#define LLMC_RUNTIME_TOKENIZER_CHAT_TEMPLATE_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace llmc {

struct ChatMessage {
  std::string role;  // "system", "user", "assistant"
  std::string content;
};

enum class ChatTemplateKind {
  kChatML,
  kQwen3,
  kLlama3,
  kPhi3,
  kGemma,
};

struct ChatTemplate {
  ChatTemplateKind kind = ChatTemplateKind::kChatML;
  // System message the model's template inserts before a conversation that
  // does not start with one; empty for none.
  std::string default_system_prompt;
  // Text of the BOS token the template writes at the start (Llama 3's
  // `bos_token`); empty for templates that write none. Rendered text then
  // starts with it, so it is tokenized without adding another BOS.
  std::string bos_token;
};

const char* ToString(ChatTemplateKind kind);

// Recognises a model's Jinja template. An error names the markers looked for
// and suggests --chat-template.
absl::StatusOr<ChatTemplate> DetectChatTemplate(std::string_view jinja);

// A built-in template by name ("chatml", "qwen3", "llama3", "phi3", "gemma"); an unknown name is an
// error listing the known ones.
absl::StatusOr<ChatTemplate> ChatTemplateByName(std::string_view name);
std::vector<std::string> KnownChatTemplateNames();

// The prompt text of `messages`; with `add_generation_prompt`, followed by
// the opening of an assistant turn. `enable_thinking` false (the Jinja
// variable Qwen3's template reads, vLLM's chat_template_kwargs) opens the
// assistant turn with an empty <think></think> block, so that Qwen3 answers
// without reasoning; the other templates do not read it.
std::string ApplyChatTemplate(const ChatTemplate& tmpl, absl::Span<const ChatMessage> messages,
                              bool add_generation_prompt, bool enable_thinking = true);

}  // namespace llmc

#endif  // LLMC_RUNTIME_TOKENIZER_CHAT_TEMPLATE_H_
