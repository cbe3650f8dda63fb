// `llmc perplexity`, computed as llama.cpp's perplexity tool does (see
// docs/runtime.md): the text is tokenized once (with BOS when the model adds
// one) and cut into chunks of --ctx tokens; each chunk is evaluated from an
// empty cache with its first token replaced by BOS, and only the second half
// of each chunk is scored (every token there has at least ctx/2 tokens of
// context). PPL = exp(mean negative log-likelihood over the scored tokens).
// The logprobs are an engine score request's prompt logprobs, which the
// runner computes (the device sampler on a GPU): float logprobs of a
// float64 normalizer, so the PPL is the raw logits' within a few 1e-7.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "llmc/runtime/cli/commands.h"
#include "rank_entry.h"
#include "run_command.h"
#include "runner_flags.h"

namespace llmc::cli {

int RunPerplexityCommand(int argc, char** argv) {
  std::string file;
  int64_t ctx = 512, max_chunks = 0;
  RunnerFlags runner;
  FlagSet flags(std::string(argv[0]) + " ARTIFACT --file TEXT [--ctx N]", kPerplexitySummary);
  flags.AddString("file", &file, "text file to score", 'f');
  flags.AddInt("chunks", &max_chunks, "score at most this many chunks (0: all)");
  runner.Register(flags);
  if (auto rc = ParseCommandLine(flags, argc, argv)) return *rc;
  if (runner.ctx > 0) ctx = runner.ctx;
  if (flags.positional().size() != 1 || file.empty()) {
    std::fprintf(stderr, "%s: expected ARTIFACT and --file (see --help)\n", argv[0]);
    return kExitUsage;
  }
  if (ctx < 4) {
    std::fprintf(stderr, "%s: --ctx must be at least 4\n", argv[0]);
    return kExitUsage;
  }
  std::ifstream in(file, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "%s: %s: cannot read\n", argv[0], file.c_str());
    return 1;
  }
  std::stringstream ss;
  ss << in.rdbuf();
  if (int rc = runner.ResolveBackend(argv[0], flags.positional()[0]); rc != 0) return rc;
  GeneratorOptions options = runner.Options(/*logits_rows=*/0);
  options.runner.max_batch_tokens = std::min<int64_t>(runner.batch, ctx);
  options.runner.num_blocks = (ctx + options.runner.block_size - 1) / options.runner.block_size;
  auto loaded = LoadForCommand(argv[0], flags.positional()[0], options);
  if (!loaded) return 1;
  if (loaded->follower()) return RunFollower(*loaded);
  auto gen = Generator::Create(std::move(loaded->model));
  if (!gen.ok()) {
    std::fprintf(stderr, "%s: %s\n", argv[0], std::string(gen.status().message()).c_str());
    return 1;
  }
  const Tokenizer& tok = (*gen)->tokenizer();
  std::vector<int32_t> tokens = tok.Encode(ss.str(), /*add_bos=*/true, /*parse_special=*/false);
  int64_t n_chunks = int64_t(tokens.size()) / ctx;
  if (max_chunks > 0) n_chunks = std::min(n_chunks, max_chunks);
  if (n_chunks == 0) {
    std::fprintf(stderr, "%s: %s has %zu tokens, fewer than one chunk of %lld\n", argv[0],
                 file.c_str(), tokens.size(), (long long)ctx);
    return 1;
  }
  std::fprintf(stderr, "llmc perplexity: %zu tokens, %lld chunks of %lld, scoring the second half of each\n",
               tokens.size(), (long long)n_chunks, (long long)ctx);
  const int64_t first = ctx / 2;
  double nll = 0, nll2 = 0;
  int64_t count = 0;
  for (int64_t c = 0; c < n_chunks; ++c) {
    std::vector<int32_t> chunk(tokens.begin() + c * ctx, tokens.begin() + (c + 1) * ctx);
    if (tok.add_bos() && tok.bos_id() >= 0) chunk[0] = tok.bos_id();
    // The runner computes each position's logprob of the next token (a
    // GPU on the device): no logits cross to the host.
    auto st = (*gen)->PromptLogprobs(chunk, /*top_n=*/0, [&](int64_t i, const SampleResult& r) {
      if (i < first) return;
      const double lp = r.logprob;
      nll -= lp;
      nll2 += lp * lp;
      ++count;
    });
    if (!st.ok()) {
      std::fprintf(stderr, "%s: %s\n", argv[0], std::string(st.message()).c_str());
      return 1;
    }
    std::fprintf(stderr, "[%lld]%.4f ", (long long)(c + 1), std::exp(nll / double(count)));
  }
  double mean = nll / double(count);
  double ppl = std::exp(mean);
  double var = nll2 / double(count) - mean * mean;
  double err = count > 1 && var > 0 ? ppl * std::sqrt(var / double(count - 1)) : 0;
  std::fprintf(stderr, "\n");
  std::printf("Final estimate: PPL = %.4f +/- %.5f (%lld tokens scored)\n", ppl, err, (long long)count);
  return 0;
}

}  // namespace llmc::cli
