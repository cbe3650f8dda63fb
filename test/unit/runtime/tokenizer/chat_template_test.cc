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

TEST(ChatTemplate, UnknownNameListsKnownOnes) {
  auto t = ChatTemplateByName("vicuna");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().message(), "unknown chat template 'vicuna' (known: chatml, llama3)");
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
