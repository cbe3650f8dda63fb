#include "llmc/runtime/tokenizer/chat_template.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace llmc {
namespace {

// The templates as the models ship them (tokenizer_config.json, JSON-decoded).
constexpr char kSmolLM2Template[] =
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
    "Face<|im_end|>\n' }}"
    "{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + "
    "'\n'}}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";

constexpr char kQwen2Template[] =
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\\nYou are a helpful assistant.<|im_end|>\\n' }}{% endif %}"
    "{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% "
    "endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

constexpr char kPlainChatMLTemplate[] =
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + "
    "'<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' "
    "}}{% endif %}";

constexpr char kLlama3Template[] =
    "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = "
    "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim "
    "+ "
    "'<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}"
    "{{ content }}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}";

// The assistant and generation-prompt parts of Qwen3-0.6B's template (its
// tool-call branches left out): what detection keys on and what the
// rendering must reproduce.
constexpr char kQwen3Template[] =
    "{%- set ns = namespace(multi_step_tool=true, last_query_index=messages|length - 1) %}"
    "{%- for message in messages[::-1] %}{%- set index = (messages|length - 1) - loop.index0 %}"
    "{%- if ns.multi_step_tool and message.role == \"user\" %}{%- set ns.multi_step_tool = false "
    "%}{%- set ns.last_query_index = index %}{%- endif %}{%- endfor %}"
    "{%- for message in messages %}{%- if message.role == \"user\" or message.role == \"system\" %}"
    "{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}"
    "{%- elif message.role == \"assistant\" %}{%- set content = message.content %}"
    "{%- set reasoning_content = '' %}{%- if '</think>' in message.content %}"
    "{%- set content = message.content.split('</think>')[-1].lstrip('\\n') %}"
    "{%- set reasoning_content = "
    "message.content.split('</think>')[0].rstrip('\\n').split('<think>')[-1].lstrip('\\n') %}"
    "{%- endif %}{%- if loop.index0 > ns.last_query_index %}"
    "{%- if loop.last or (not loop.last and reasoning_content) %}"
    "{{- '<|im_start|>' + message.role + '\\n<think>\\n' + reasoning_content.strip('\\n') + "
    "'\\n</think>\\n\\n' + content.lstrip('\\n') }}"
    "{%- else %}{{- '<|im_start|>' + message.role + '\\n' + content }}{%- endif %}"
    "{%- else %}{{- '<|im_start|>' + message.role + '\\n' + content }}{%- endif %}"
    "{{- '<|im_end|>\\n' }}{%- endif %}{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}";

// Phi-3-mini-4k-instruct's template.
constexpr char kPhi3Template[] =
    "{% for message in messages %}{% if message['role'] == 'system' %}{{'<|system|>\n' + "
    "message['content'] + '<|end|>\n'}}{% elif message['role'] == 'user' %}{{'<|user|>\n' + "
    "message['content'] + '<|end|>\n'}}{% elif message['role'] == 'assistant' %}"
    "{{'<|assistant|>\n' + message['content'] + '<|end|>\n'}}{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|assistant|>\n' }}{% else %}{{ eos_token }}{% endif %}";

// The text-only parts of Gemma 3's template (its image branches left out).
constexpr char kGemma3Template[] =
    "{{ bos_token }}{%- if messages[0]['role'] == 'system' -%}{%- set first_user_prefix = "
    "messages[0]['content'] + '\n\n' -%}{%- set loop_messages = messages[1:] -%}{%- else -%}"
    "{%- set first_user_prefix = \"\" -%}{%- set loop_messages = messages -%}{%- endif -%}"
    "{%- for message in loop_messages -%}{%- if (message['role'] == 'assistant') -%}"
    "{%- set role = \"model\" -%}{%- else -%}{%- set role = message['role'] -%}{%- endif -%}"
    "{{ '<start_of_turn>' + role + '\n' + (first_user_prefix if loop.first else \"\") }}"
    "{{ message['content'] | trim }}{{ '<end_of_turn>\n' }}{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{'<start_of_turn>model\n'}}{%- endif -%}";

const std::vector<ChatMessage> kConversation = {{"system", "Be brief."},
                                                {"user", "Hi!"},
                                                {"assistant", "Hello."},
                                                {"user", " What is 2+2? \n"}};

TEST(ChatTemplate, ChatMLRendersEveryTurn) {
  auto t = ChatTemplateByName("chatml");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(ApplyChatTemplate(*t, kConversation, /*add_generation_prompt=*/true),
            "<|im_start|>system\nBe brief.<|im_end|>\n"
            "<|im_start|>user\nHi!<|im_end|>\n"
            "<|im_start|>assistant\nHello.<|im_end|>\n"
            "<|im_start|>user\n What is 2+2? \n<|im_end|>\n"
            "<|im_start|>assistant\n");
  EXPECT_EQ(ApplyChatTemplate(*t, {{"user", "x"}}, /*add_generation_prompt=*/false),
            "<|im_start|>user\nx<|im_end|>\n");
}

TEST(ChatTemplate, SmolLM2InsertsItsSystemPromptOnlyWhenMissing) {
  auto t = DetectChatTemplate(kSmolLM2Template);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->kind, ChatTemplateKind::kChatML);
  EXPECT_EQ(ApplyChatTemplate(*t, {{"user", "Hi!"}}, true),
            "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
            "Face<|im_end|>\n"
            "<|im_start|>user\nHi!<|im_end|>\n<|im_start|>assistant\n");
  // A conversation with its own system message keeps it and gets no other.
  EXPECT_EQ(ApplyChatTemplate(*t, {{"system", "S"}, {"user", "U"}}, false),
            "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n");
  // No messages: the loop never runs, so nothing is inserted.
  EXPECT_EQ(ApplyChatTemplate(*t, {}, true), "<|im_start|>assistant\n");
}

TEST(ChatTemplate, Qwen2DefaultSystemPromptWithEscapedNewlines) {
  auto t = DetectChatTemplate(kQwen2Template);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->default_system_prompt, "You are a helpful assistant.");
}

TEST(ChatTemplate, PlainChatMLHasNoDefaultSystemPrompt) {
  auto t = DetectChatTemplate(kPlainChatMLTemplate);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->kind, ChatTemplateKind::kChatML);
  EXPECT_EQ(t->default_system_prompt, "");
}

TEST(ChatTemplate, Llama3WritesBosAndTrimsContent) {
  auto t = DetectChatTemplate(kLlama3Template);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->kind, ChatTemplateKind::kLlama3);
  EXPECT_EQ(ApplyChatTemplate(*t, kConversation, true),
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nHi!<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\nHello.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nWhat is 2+2?<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
  auto named = ChatTemplateByName("llama3");
  ASSERT_TRUE(named.ok());
  EXPECT_EQ(ApplyChatTemplate(*named, kConversation, true),
            ApplyChatTemplate(*t, kConversation, true));
}

TEST(ChatTemplate, Qwen3CutsTheReasoningOfEarlierTurns) {
  auto t = DetectChatTemplate(kQwen3Template);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->kind, ChatTemplateKind::kQwen3);
  // Without reasoning in the history, the text is ChatML's.
  auto chatml = ChatTemplateByName("chatml");
  ASSERT_TRUE(chatml.ok());
  EXPECT_EQ(ApplyChatTemplate(*t, kConversation, true),
            ApplyChatTemplate(*chatml, kConversation, true));
  // An answered turn before the last question keeps only its answer.
  const std::vector<ChatMessage> earlier = {
      {"user", "2+2?"}, {"assistant", "<think>\nadd them\n</think>\n\n4"}, {"user", "3+3?"}};
  EXPECT_EQ(ApplyChatTemplate(*t, earlier, true),
            "<|im_start|>user\n2+2?<|im_end|>\n"
            "<|im_start|>assistant\n4<|im_end|>\n"
            "<|im_start|>user\n3+3?<|im_end|>\n"
            "<|im_start|>assistant\n");
  // After the last question a turn keeps its reasoning, re-spaced; the last
  // message keeps an empty think block even without reasoning.
  const std::vector<ChatMessage> later = {{"user", "2+2?"},
                                          {"assistant", "<think>\n\nadd\n\n</think>4"},
                                          {"assistant", "Sure."}};
  EXPECT_EQ(ApplyChatTemplate(*t, later, false),
            "<|im_start|>user\n2+2?<|im_end|>\n"
            "<|im_start|>assistant\n<think>\nadd\n</think>\n\n4<|im_end|>\n"
            "<|im_start|>assistant\n<think>\n\n</think>\n\nSure.<|im_end|>\n");
  // enable_thinking false (chat_template_kwargs) opens the answer with an
  // empty think block; the other templates ignore it.
  EXPECT_EQ(ApplyChatTemplate(*t, {{"user", "2+2?"}}, true, /*enable_thinking=*/false),
            "<|im_start|>user\n2+2?<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
  EXPECT_EQ(ApplyChatTemplate(*chatml, kConversation, true, /*enable_thinking=*/false),
            ApplyChatTemplate(*chatml, kConversation, true));
  // A ChatML template without the reasoning rule stays ChatML.
  auto plain = DetectChatTemplate(kPlainChatMLTemplate);
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->kind, ChatTemplateKind::kChatML);
}

TEST(ChatTemplate, Phi3TagsEachTurnWithItsRole) {
  auto t = DetectChatTemplate(kPhi3Template);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->kind, ChatTemplateKind::kPhi3);
  EXPECT_EQ(ApplyChatTemplate(*t, kConversation, true),
            "<|system|>\nBe brief.<|end|>\n<|user|>\nHi!<|end|>\n<|assistant|>\nHello.<|end|>\n"
            "<|user|>\n What is 2+2? \n<|end|>\n<|assistant|>\n");
  EXPECT_EQ(ApplyChatTemplate(*t, {{"user", "Hi"}}, false), "<|user|>\nHi<|end|>\n");
}

TEST(ChatTemplate, GemmaFoldsTheSystemMessageIntoTheFirstUserTurn) {
  auto t = DetectChatTemplate(kGemma3Template);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->kind, ChatTemplateKind::kGemma);
  EXPECT_EQ(ApplyChatTemplate(*t, kConversation, true),
            "<bos><start_of_turn>user\nBe brief.\n\nHi!<end_of_turn>\n"
            "<start_of_turn>model\nHello.<end_of_turn>\n"
            "<start_of_turn>user\nWhat is 2+2?<end_of_turn>\n<start_of_turn>model\n");
  // Without a system message the first turn is the user's alone.
  EXPECT_EQ(ApplyChatTemplate(*t, {{"user", " Hi "}}, false),
            "<bos><start_of_turn>user\nHi<end_of_turn>\n");
  auto named = ChatTemplateByName("gemma");
  ASSERT_TRUE(named.ok());
  EXPECT_EQ(ApplyChatTemplate(*named, kConversation, true),
            ApplyChatTemplate(*t, kConversation, true));
}

TEST(ChatTemplate, UnknownNameListsKnownOnes) {
  auto t = ChatTemplateByName("vicuna");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().message(),
            "unknown chat template 'vicuna' (known: chatml, qwen3, llama3, phi3, gemma)");
}

TEST(ChatTemplate, UnrecognisedTemplateSaysWhatWasLookedFor) {
  auto t =
      DetectChatTemplate("{% for m in messages %}[INST] {{ m['content'] }} [/INST]{% endfor %}");
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("--chat-template"), std::string::npos) << t.status();
  EXPECT_FALSE(DetectChatTemplate("").ok());
  // <|im_start|> look-alikes that are not ChatML are refused, not misrendered.
  EXPECT_FALSE(DetectChatTemplate("<|im_start|>user<|im_sep|>hi<|im_end|>").ok());
  // So is Llama 3.1's, whose dated system message the built-in would omit.
  EXPECT_FALSE(DetectChatTemplate(std::string(kLlama3Template) +
                                  "{{- \"Cutting Knowledge Date: December 2023\\n\" }}")
                   .ok());
}

}  // namespace
}  // namespace llmc
