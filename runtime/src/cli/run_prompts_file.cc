// `llmc run --prompts-file FILE.jsonl`: every request of the file through the
// serving engine at once (continuous batching), results as JSONL in the
// file's order.
#include "run_prompts_file.h"

#include <chrono>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "absl/strings/str_format.h"
#include "prompts_file.h"
#include "rank_entry.h"

namespace llmc::cli {
namespace {

struct Completion {
  const PromptLine* line = nullptr;
  int32_t index = 0;  // among the line's n
  std::vector<int32_t> tokens;
  std::string text;
  std::vector<SampleResult> logprobs;
  RequestOutput final;
  std::string error;  // refused at admission
};

nlohmann::ordered_json ToJson(const Completion& c) {
  nlohmann::ordered_json j;
  j["id"] = c.line->id;
  if (c.line->n > 1) j["index"] = c.index;
  if (!c.error.empty()) {
    j["error"] = c.error;
    return j;
  }
  j["text"] = c.text;
  j["token_ids"] = c.tokens;
  j["finish_reason"] = ToString(c.final.reason);
  if (!c.final.status.ok()) j["error"] = std::string(c.final.status.message());
  j["usage"] = {{"prompt_tokens", c.final.usage.prompt_tokens},
                {"completion_tokens", c.final.usage.completion_tokens},
                {"cached_prompt_tokens", c.final.usage.cached_prompt_tokens},
                {"preemptions", c.final.usage.num_preemptions}};
  if (!c.logprobs.empty()) {
    nlohmann::ordered_json lp = nlohmann::ordered_json::array();
    for (const SampleResult& r : c.logprobs) {
      nlohmann::ordered_json top = nlohmann::ordered_json::array();
      for (const TokenLogprob& t : r.top_logprobs) top.push_back({t.token, t.logprob});
      lp.push_back({{"logprob", r.logprob}, {"top", top}});
    }
    j["logprobs"] = lp;
  }
  return j;
}

}  // namespace

int RunPromptsFile(const PromptsFileRun& run) {
  const char* self = run.self;
  std::ifstream in(run.path, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "%s: cannot read --prompts-file %s\n", self, run.path.c_str());
    return kExitUsage;
  }
  std::stringstream contents;
  contents << in.rdbuf();
  auto lines = ParsePromptsFile(run.path, contents.str(), run.defaults);
  if (!lines.ok()) {
    std::fprintf(stderr, "%s: %s\n", self, std::string(lines.status().message()).c_str());
    return kExitUsage;
  }
  auto loaded = LoadForCommand(self, run.artifact, run.load);
  if (!loaded) return 1;
  if (loaded->follower()) return RunFollower(*loaded);
  auto engine = Engine::Create(std::move(loaded->model), run.engine);
  if (!engine.ok()) {
    std::fprintf(stderr, "%s: %s\n", self, std::string(engine.status().message()).c_str());
    return 1;
  }
  Engine& e = **engine;
  if (!run.quiet) std::fprintf(stderr, "%s: %s\n", self, e.KvCacheSummary().c_str());

  std::vector<Completion> completions;
  for (const PromptLine& line : *lines)
    for (int32_t i = 0; i < line.n; ++i) {
      Completion c;
      c.line = &line;
      c.index = i;
      completions.push_back(std::move(c));
    }
  std::unordered_map<RequestId, Completion*> by_id;
  const auto start = std::chrono::steady_clock::now();
  for (Completion& c : completions) {
    std::vector<int32_t> prompt =
        c.line->text
            ? e.tokenizer().Encode(*c.line->text, /*add_bos=*/true, /*parse_special=*/false)
            : c.line->token_ids;
    SamplingParams params = c.line->params;
    params.seed += uint64_t(c.index);
    auto id = e.AddRequest(std::move(prompt), params);
    if (!id.ok()) {
      c.error = absl::StrFormat("%s:%d: %s", run.path, c.line->line, id.status().message());
      continue;
    }
    by_id[*id] = &c;
  }
  int exit_code = 0;
  while (e.has_unfinished()) {
    auto outputs = e.Step();
    if (!outputs.ok()) {
      std::fprintf(stderr, "%s: %s\n", self, std::string(outputs.status().message()).c_str());
      return 1;
    }
    for (RequestOutput& out : *outputs) {
      Completion& c = *by_id.at(out.id);
      c.tokens.insert(c.tokens.end(), out.tokens.begin(), out.tokens.end());
      c.text += out.text;
      for (SampleResult& r : out.logprobs) c.logprobs.push_back(std::move(r));
      if (out.finished) c.final = std::move(out);
    }
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  FILE* sink = stdout;
  if (!run.output.empty() && run.output != "-") {
    sink = std::fopen(run.output.c_str(), "w");
    if (sink == nullptr) {
      std::fprintf(stderr, "%s: cannot write --output %s\n", self, run.output.c_str());
      return 1;
    }
  }
  for (const Completion& c : completions) {
    if (!c.error.empty() || !c.final.status.ok()) exit_code = 1;
    std::string line = ToJson(c).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    std::fprintf(sink, "%s\n", line.c_str());
  }
  if (sink != stdout && std::fclose(sink) != 0) {
    std::fprintf(stderr, "%s: cannot write --output %s\n", self, run.output.c_str());
    return 1;
  }
  if (!run.quiet) {
    const EngineStats s = e.stats();
    std::fprintf(stderr,
                 "%s: %zu requests in %.3f s, %lld steps; %lld output tokens (%.1f tok/s); "
                 "prompt tokens %lld, computed %lld, from the prefix cache %lld; preemptions "
                 "%lld; %lld steps scheduled ahead, %lld tokens fed on the device; %s\n",
                 self, completions.size(), seconds, (long long)s.scheduler.num_steps,
                 (long long)s.output_tokens, seconds > 0 ? double(s.output_tokens) / seconds : 0.0,
                 (long long)s.scheduler.prompt_tokens,
                 (long long)s.scheduler.computed_prompt_tokens,
                 (long long)s.scheduler.prefix_hit_tokens, (long long)s.scheduler.num_preemptions,
                 (long long)s.steps_ahead, (long long)s.fed_tokens,
                 e.runner().ExecutionSummary().c_str());
  }
  return exit_code;
}

}  // namespace llmc::cli
