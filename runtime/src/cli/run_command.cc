#include "run_command.h"

#include <cstdio>
#include <string>

#include "absl/strings/str_format.h"
#include "llmc/runtime/cli/commands.h"
#include "llmc/runtime/tokenizer/chat_template.h"
#include "engine_flags.h"
#include "rank_entry.h"
#include "run_prompts_file.h"
#include "runner_flags.h"

namespace llmc::cli {

int RunRunCommand(int argc, char** argv) {
  std::string prompt, system, chat_template, stop, prompts_file, output;
  int64_t max_tokens = 64, top_k = 40, seed = 0, repeat_last_n = 64;
  double temperature = 0.8, top_p = 0.95, min_p = 0.05, repeat_penalty = 1.0;
  bool chat = false, greedy = false, no_stats = false, ignore_eos = false;
  RunnerFlags runner;
  EngineFlags engine;
  FlagSet flags(std::string(argv[0]) + " ARTIFACT (-p PROMPT | --prompts-file FILE.jsonl) [flags]",
                kRunSummary);
  flags.AddString("prompt", &prompt, "the prompt text", 'p');
  flags.AddString("prompts-file", &prompts_file,
                  "JSONL, one request per line with its own sampling fields: run them all "
                  "concurrently through the serving engine (docs/runtime.md)");
  flags.AddString("output", &output, "--prompts-file: write the JSONL results here (default stdout)", 'o');
  flags.AddInt("tokens", &max_tokens, "most tokens to generate (-1: until EOS or the context ends)", 'n');
  flags.AddBool("chat", &chat, "wrap the prompt in the model's chat template as a user turn");
  flags.AddString("system", &system, "system message for --chat");
  flags.AddString("chat-template", &chat_template, "chat template name (chatml, qwen3, llama3, phi3, gemma) instead of the model's");
  flags.AddDouble("temp", &temperature, "sampling temperature (0: greedy)");
  flags.AddBool("greedy", &greedy, "always take the most likely token (same as --temp 0)");
  flags.AddInt("top-k", &top_k, "keep the k most likely tokens (0: off)");
  flags.AddDouble("top-p", &top_p, "nucleus sampling threshold (1: off)");
  flags.AddDouble("min-p", &min_p, "drop tokens below min-p times the top probability (0: off)");
  flags.AddDouble("repeat-penalty", &repeat_penalty, "repetition penalty (1: off)");
  flags.AddInt("repeat-last-n", &repeat_last_n, "tokens the repetition penalty looks back over");
  flags.AddInt("seed", &seed, "random seed", 's');
  flags.AddString("stop", &stop, "stop generating before this text");
  flags.AddBool("ignore-eos", &ignore_eos,
                "never sample end-of-generation tokens, so generation runs to -n tokens "
                "(llama.cpp's --ignore-eos)");
  flags.AddBool("no-stats", &no_stats, "do not print timings to stderr");
  runner.Register(flags);
  engine.Register(flags, runner);
  if (auto rc = ParseCommandLine(flags, argc, argv)) return *rc;
  if (flags.positional().size() != 1) {
    std::fprintf(stderr, "%s: expected one ARTIFACT (see --help)\n", argv[0]);
    return kExitUsage;
  }
  if (int rc = runner.ResolveBackend(argv[0], flags.positional()[0]); rc != 0) return rc;
  SamplingParams params;
  params.temperature = greedy ? 0.f : float(temperature);
  params.top_k = int(top_k);
  params.top_p = float(top_p);
  params.min_p = float(min_p);
  params.repetition_penalty = float(repeat_penalty);
  params.repeat_last_n = int(repeat_last_n);
  params.seed = uint64_t(seed);
  params.max_tokens = int(max_tokens);
  params.ignore_eos = ignore_eos;
  if (!stop.empty()) params.stop.push_back(stop);
  if (!prompts_file.empty()) {
    if (!prompt.empty() || chat) {
      std::fprintf(stderr, "%s: --prompts-file takes the prompts from the file: drop -p/--chat\n",
                   argv[0]);
      return kExitUsage;
    }
    PromptsFileRun run{argv[0], flags.positional()[0], prompts_file, output, params,
                       runner.Options(), {}, no_stats};
    if (absl::Status st = engine.Apply(run.load, run.engine); !st.ok()) {
      std::fprintf(stderr, "%s: %s\n", argv[0], std::string(st.message()).c_str());
      return kExitUsage;
    }
    return RunPromptsFile(run);
  }
  auto loaded = LoadForCommand(argv[0], flags.positional()[0], runner.Options());
  if (!loaded) return 1;
  if (loaded->follower()) return RunFollower(*loaded);
  auto gen = Generator::Create(std::move(loaded->model));
  if (!gen.ok()) {
    std::fprintf(stderr, "%s: %s\n", argv[0], std::string(gen.status().message()).c_str());
    return 1;
  }
  const Tokenizer& tok = (*gen)->tokenizer();
  std::string text = prompt;
  bool add_bos = true;
  if (chat) {
    auto tmpl = chat_template.empty() ? DetectChatTemplate(tok.chat_template())
                                      : ChatTemplateByName(chat_template);
    if (!tmpl.ok()) {
      std::fprintf(stderr, "%s: %s\n", argv[0], std::string(tmpl.status().message()).c_str());
      return chat_template.empty() ? 1 : kExitUsage;
    }
    std::vector<ChatMessage> messages;
    if (!system.empty()) messages.push_back({"system", system});
    messages.push_back({"user", prompt});
    text = ApplyChatTemplate(*tmpl, messages, /*add_generation_prompt=*/true);
    add_bos = tmpl->bos_token.empty();  // the template wrote it already
  }
  std::vector<int32_t> ids = tok.Encode(text, add_bos, /*parse_special=*/chat);

  if (!chat) {
    std::fputs(prompt.c_str(), stdout);
    std::fflush(stdout);
  }
  auto result = (*gen)->Generate(ids, params, [](std::string_view piece) {
    std::fwrite(piece.data(), 1, piece.size(), stdout);
    std::fflush(stdout);
  });
  std::fputc('\n', stdout);
  std::fflush(stdout);
  if (!result.ok()) {
    std::fprintf(stderr, "%s: %s\n", argv[0], std::string(result.status().message()).c_str());
    return 1;
  }
  if (!no_stats) {
    const GenerationResult& r = *result;
    int64_t decoded = int64_t(r.tokens.size()) - 1;  // the first token comes from prefill
    std::fprintf(stderr,
                 "llmc run: prompt %lld tokens in %.3f s (%.1f tok/s); generated %zu tokens, "
                 "decode %.1f tok/s; finish: %s; %s\n",
                 (long long)r.prompt_tokens, r.prefill_seconds,
                 r.prefill_seconds > 0 ? double(r.prompt_tokens) / r.prefill_seconds : 0.0,
                 r.tokens.size(), r.decode_seconds > 0 ? double(decoded) / r.decode_seconds : 0.0,
                 ToString(r.reason), (*gen)->runner().ExecutionSummary().c_str());
  }
  return 0;
}

}  // namespace llmc::cli
