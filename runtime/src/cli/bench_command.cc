// `llmc bench`: prefill and decode throughput of an artifact for one
// sequence (batch 1), measured the way llama-bench measures them:
//
//   ppP   a prompt of P synthetic tokens (BOS when the model adds one, then
//         ids drawn uniformly from the vocabulary with --seed) runs as a
//         chunked prefill from an empty KV cache; t/s = P / prefill time.
//   tgN   N greedy decode steps after a prompt of --depth tokens (one token
//         at depth 0, as llama-bench's tg starts from one); t/s = N / decode
//         time. End-of-generation tokens are masked out, so every run makes
//         N steps.
//   --serving  the serving engine under load instead (bench_serving.cc).
//
//   tgN@bB  (--seqs B, B > 1) B sequences decoding together, as a server's
//         decode phase, through the engine: B greedy requests, each with its
//         own prompt of --depth tokens (all prefilled first, untimed), then
//         N engine steps of B tokens, one per sequence (end-of-generation
//         ids masked); t/s = B * N / the steps' time.
//
// Each test runs --repetitions times after one untimed warm-up; the table
// gives the mean and sample standard deviation of the per-run t/s, as
// llama-bench does. Timers are the Generator's own: they start after the
// model is loaded and stop before the result is returned. The decode timer
// also covers sampling and detokenizing each token (llama-bench's does not
// sample), a few microseconds per step against milliseconds of forward pass.
#include <sys/resource.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "llmc/runtime/cli/commands.h"
#include "bench_serving.h"
#include "rank_entry.h"
#include "run_command.h"
#include "runner_flags.h"

namespace llmc::cli {
namespace {

struct BenchTest {
  std::string name;     // "pp512", "tg64", "tg64@d512"
  int64_t n_prompt = 0;  // prompt tokens (the pp test's measured part, the tg test's depth)
  int64_t n_gen = 0;     // decode steps timed; 0 for a pp test
  int64_t n_seqs = 1;    // sequences decoding together (tgN@bB)
  // Tokens of KV cache a run needs: Generate() stops at the end of the
  // context, and the last sampled token is never run. Batched runs need
  // whole blocks per sequence.
  int64_t context(int64_t block_size = 1) const {
    int64_t one = std::max<int64_t>(n_prompt, 1) + n_gen + 1;
    if (n_seqs == 1) return one;
    return n_seqs * ((one + block_size - 1) / block_size) * block_size;
  }
};

struct Measured {
  BenchTest test;
  std::vector<double> seconds, tps;
  double mean = 0, stddev = 0;
};

// "128,512" -> {128, 512}; zeros are dropped (llama-bench's `-p 0`: no pp test).
absl::StatusOr<std::vector<int64_t>> ParseCounts(const char* flag, const std::string& text) {
  std::vector<int64_t> out;
  for (absl::string_view piece : absl::StrSplit(text, ',', absl::SkipWhitespace())) {
    int64_t n;
    if (!absl::SimpleAtoi(piece, &n) || n < 0)
      return absl::InvalidArgumentError(absl::StrFormat(
          "flag --%s expects comma-separated token counts >= 0, got '%s'", flag, text));
    if (n > 0) out.push_back(n);
  }
  return out;
}

std::vector<int32_t> SyntheticTokens(int64_t n, const Tokenizer& tok, int64_t vocab,
                                     std::mt19937_64& rng) {
  std::vector<int32_t> ids;
  if (tok.add_bos() && tok.bos_id() >= 0) ids.push_back(tok.bos_id());
  // mt19937_64's output is fixed by the standard; the modulo keeps the ids
  // the same on every platform (a distribution object would not).
  while (int64_t(ids.size()) < n) ids.push_back(int32_t(rng() % uint64_t(vocab)));
  ids.resize(size_t(n));
  return ids;
}

// One timed run of `t`: its seconds.
// With `verify`, a batched test also decodes each of its sequences alone and
// fails unless the greedy tokens are the same.
absl::StatusOr<double> RunOnce(Generator& gen, const BenchTest& t, std::mt19937_64& rng,
                               bool verify = false) {
  int64_t vocab = std::min(gen.runner().vocab_size(), gen.tokenizer().vocab_size());
  std::vector<int32_t> prompt =
      SyntheticTokens(std::max<int64_t>(t.n_prompt, 1), gen.tokenizer(), vocab, rng);
  if (t.n_seqs > 1) {
    std::vector<std::vector<int32_t>> prompts;
    for (int64_t i = 0; i < t.n_seqs; ++i)
      prompts.push_back(SyntheticTokens(std::max<int64_t>(t.n_prompt, 1), gen.tokenizer(), vocab, rng));
    std::vector<std::vector<int32_t>> batched;
    auto seconds = gen.TimeBatchedDecode(prompts, t.n_gen, verify ? &batched : nullptr);
    if (!seconds.ok() || !verify) return seconds;
    // Each sequence again on its own: the same greedy tokens.
    for (size_t i = 0; i < prompts.size(); ++i) {
      SamplingParams params;
      params.temperature = 0;
      params.ignore_eos = true;
      params.max_tokens = int(t.n_gen + 1);
      auto alone = gen.Generate(prompts[i], params, nullptr);
      if (!alone.ok()) return alone.status();
      if (alone->tokens != batched[i]) {
        size_t j = 0;
        while (j < alone->tokens.size() && j < batched[i].size() &&
               alone->tokens[j] == batched[i][j])
          ++j;
        return absl::InternalError(absl::StrFormat(
            "%s: sequence %d decoded together with %d others gives other tokens than alone "
            "(--verify-seqs): token %d is %d, alone %d",
            t.name, i, t.n_seqs - 1, j, j < batched[i].size() ? batched[i][j] : -1,
            j < alone->tokens.size() ? alone->tokens[j] : -1));
      }
    }
  }
  SamplingParams params;
  params.temperature = 0;
  params.ignore_eos = true;
  // The first token comes from the prefill's logits: n_gen + 1 tokens take
  // exactly n_gen decode steps.
  params.max_tokens = int(t.n_gen + 1);
  auto r = gen.Generate(prompt, params, nullptr);
  if (!r.ok()) return r.status();
  if (t.n_gen == 0) return r->prefill_seconds;
  if (int64_t(r->tokens.size()) != t.n_gen + 1)
    return absl::InternalError(absl::StrFormat("%s: generated %d of %d tokens (finish: %s)", t.name,
                                               int64_t(r->tokens.size()) - 1, t.n_gen,
                                               ToString(r->reason)));
  return r->decode_seconds;
}

void Summarize(Measured& m) {
  double sum = 0;
  for (double v : m.tps) sum += v;
  m.mean = sum / double(m.tps.size());
  double ss = 0;
  for (double v : m.tps) ss += (v - m.mean) * (v - m.mean);
  m.stddev = m.tps.size() > 1 ? std::sqrt(ss / double(m.tps.size() - 1)) : 0;
}

int64_t PeakRssBytes() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return int64_t(u.ru_maxrss) * 1024;  // kilobytes on Linux
}

int Fail(const char* self, const absl::Status& st, int code) {
  std::fprintf(stderr, "%s: %s\n", self, std::string(st.message()).c_str());
  return code;
}

}  // namespace

int RunBenchCommand(int argc, char** argv) {
  if (WantsServingBench(argc, argv)) return RunServingBench(argc, argv);
  std::string prompt_list = "128,512", seqs_list = "1";
  int64_t gen_tokens = 64, depth = 0, repetitions = 5, seed = 1;
  bool json = false, warmup = true, verify_seqs = false;
  RunnerFlags runner;
  FlagSet flags(std::string(argv[0]) + " ARTIFACT [-p 128,512] [-n 64] [-r 5] [--json]",
                kBenchSummary);
  flags.AddString("prompt-tokens", &prompt_list, "prefill tests: prompt lengths, comma-separated (0: none)", 'p');
  flags.AddInt("gen-tokens", &gen_tokens, "decode test: greedy steps timed (0: none)", 'n');
  flags.AddInt("depth", &depth, "prompt tokens before the decode test's steps (0: one token)", 'd');
  flags.AddString("seqs", &seqs_list,
                  "decode test: sequences decoding together, comma-separated (1,8,64: one test each)", 'B');
  flags.AddBool("verify-seqs", &verify_seqs,
                "also decode each sequence of a --seqs test alone (untimed) and require the same "
                "greedy tokens");
  flags.AddInt("repetitions", &repetitions, "timed runs of each test", 'r');
  flags.AddInt("seed", &seed, "seed of the synthetic prompt tokens");
  flags.AddBool("warmup", &warmup, "one untimed run first (--no-warmup skips it)");
  flags.AddBool("json", &json, "print the results as JSON instead of a table");
  runner.Register(flags);
  const char* self = argv[0];
  if (auto st = flags.Parse(argc, argv); !st.ok()) return Fail(self, st, kExitUsage);
  if (flags.help_requested()) {
    // One --help for both benchmarks: --serving's flags are a command of
    // their own, and a user who reads only this page must find them.
    std::fputs(flags.Usage().c_str(), stdout);
    std::fputs(("\n" + ServingBenchUsage(self)).c_str(), stdout);
    return 0;
  }
  auto bad = [&](std::string msg) { return Fail(self, absl::InvalidArgumentError(msg), kExitUsage); };
  if (flags.positional().size() != 1) return bad("expected one ARTIFACT (see --help)");
  auto prompts = ParseCounts("prompt-tokens", prompt_list);
  if (!prompts.ok()) return Fail(self, prompts.status(), kExitUsage);
  auto seqs = ParseCounts("seqs", seqs_list);
  if (!seqs.ok()) return Fail(self, seqs.status(), kExitUsage);
  if (seqs->empty()) return bad("flag --seqs needs a count >= 1");
  if (gen_tokens < 0) return bad(absl::StrFormat("flag --gen-tokens must be >= 0, got %d", gen_tokens));
  if (depth < 0) return bad(absl::StrFormat("flag --depth must be >= 0, got %d", depth));
  if (repetitions < 1) return bad(absl::StrFormat("flag --repetitions must be >= 1, got %d", repetitions));
  if (runner.threads < 0) return bad(absl::StrFormat("flag --threads must be >= 0, got %d", runner.threads));
  if (runner.batch < 1) return bad(absl::StrFormat("flag --batch must be >= 1, got %d", runner.batch));
  if (runner.block_size < 1) return bad(absl::StrFormat("flag --block-size must be >= 1, got %d", runner.block_size));
  if (runner.ctx < 0) return bad(absl::StrFormat("flag --ctx must be >= 0, got %d", runner.ctx));

  std::vector<BenchTest> tests;
  for (int64_t p : *prompts) tests.push_back({absl::StrFormat("pp%d", p), p, 0});
  if (gen_tokens > 0)
    for (int64_t b : *seqs) {
      std::string name = depth > 0 ? absl::StrFormat("tg%d@d%d", gen_tokens, depth)
                                   : absl::StrFormat("tg%d", gen_tokens);
      if (b > 1) name += absl::StrFormat("@b%d", b);
      if (b > runner.batch)
        return bad(absl::StrFormat("flag --seqs %d exceeds --batch %d (tokens per step)", b, runner.batch));
      tests.push_back({name, depth, gen_tokens, b});
    }
  if (tests.empty()) return bad("nothing to measure: --prompt-tokens and --gen-tokens are both 0");
  // The warm-up: the largest prefill chunk and a decode step, which touches
  // every activation buffer and the KV pages, and wakes the thread pool.
  BenchTest warm{"warm-up", 0, 1};
  for (const BenchTest& t : tests) warm.n_prompt = std::max(warm.n_prompt, std::min(t.n_prompt, runner.batch));
  // The KV cache holds what the largest run needs (every run starts from an
  // empty cache), not the model's whole context.
  int64_t needed = warmup ? warm.context() : 0;
  for (const BenchTest& t : tests) needed = std::max(needed, t.context(runner.block_size));
  if (runner.ctx > 0 && runner.ctx < needed)
    return bad(absl::StrFormat("flag --ctx %d is too small: the tests need %d tokens", runner.ctx, needed));
  if (int rc = runner.ResolveBackend(self, flags.positional()[0]); rc != 0) return rc;
  // Batched decode tests return one row of logits per sequence.
  GeneratorOptions options = runner.Options(*std::max_element(seqs->begin(), seqs->end()));
  int64_t ctx = runner.ctx > 0 ? runner.ctx : needed;
  options.runner.num_blocks = (ctx + runner.block_size - 1) / runner.block_size;

  auto loaded = LoadForCommand(self, flags.positional()[0], options);
  if (!loaded) return 1;
  if (loaded->follower()) return RunFollower(*loaded);
  auto gen = Generator::Create(std::move(loaded->model));
  if (!gen.ok()) return Fail(self, gen.status(), 1);
  const ModelConfig& model = (*gen)->artifact().manifest().model;
  // One sequence's context (a batched test's sequences are each that long).
  int64_t longest = 0;
  for (const BenchTest& t : tests) longest = std::max(longest, BenchTest{t.name, t.n_prompt, t.n_gen}.context());
  if (longest > std::min<int64_t>((*gen)->max_context(), model.max_position))
    return bad(absl::StrFormat("the tests need %d tokens of context but the model's max_position is %d",
                               longest, model.max_position));
  int threads = (*gen)->runner().threads();
  std::string where = (*gen)->runner().ExecutionSummary();
  std::mt19937_64 rng{static_cast<uint64_t>(seed)};
  if (warmup)
    if (auto s = RunOnce(**gen, warm, rng); !s.ok()) return Fail(self, s.status(), 1);

  if (!json) {
    std::printf("llmc bench: %s (%s, %lld layers, hidden %lld, %.1f MiB of weights); %s, "
                "batch %lld, %d repetitions\n",
                flags.positional()[0].c_str(), model.architecture.c_str(), (long long)model.num_layers,
                (long long)model.hidden_size, double((*gen)->artifact().manifest().weights.size) / (1 << 20),
                where.c_str(), (long long)runner.batch, int(repetitions));
    // "±" is two bytes: the header is written out rather than padded by printf.
    std::printf("| test         |        t/s |        ± |\n"
                "| ------------ | ---------: | -------: |\n");
    std::fflush(stdout);
  }
  std::vector<Measured> results;
  for (const BenchTest& t : tests) {
    Measured m{t, {}, {}};
    for (int64_t r = 0; r < repetitions; ++r) {
      auto s = RunOnce(**gen, t, rng, verify_seqs && r == 0);
      if (!s.ok()) return Fail(self, s.status(), 1);
      m.seconds.push_back(*s);
      m.tps.push_back(double(t.n_gen > 0 ? t.n_gen * t.n_seqs : t.n_prompt) / std::max(*s, 1e-12));
    }
    Summarize(m);
    if (!json) {
      std::printf("| %-12s | %10.2f | %8.2f |\n", t.name.c_str(), m.mean, m.stddev);
      std::fflush(stdout);
    }
    results.push_back(std::move(m));
  }
  int64_t rss = PeakRssBytes();
  if (!json) {
    std::printf("peak RSS: %.1f MiB\n", double(rss) / (1 << 20));
    return 0;
  }
  using nlohmann::ordered_json;
  ordered_json j;
  j["artifact"] = flags.positional()[0];
  j["model"] = {{"architecture", model.architecture}, {"layers", model.num_layers},
                {"hidden", model.hidden_size},        {"vocab", model.vocab_size},
                {"weight_bytes", (*gen)->artifact().manifest().weights.size}};
  j["threads"] = threads;
  j["batch"] = runner.batch;
  j["ctx"] = ctx;
  j["repetitions"] = repetitions;
  j["warmup"] = warmup;
  j["seed"] = seed;
  j["tests"] = ordered_json::array();
  for (const Measured& m : results) {
    ordered_json samples_ns = ordered_json::array();
    for (double s : m.seconds) samples_ns.push_back(int64_t(std::llround(s * 1e9)));
    j["tests"].push_back({{"test", m.test.name},
                          {"n_prompt", m.test.n_gen > 0 ? 0 : m.test.n_prompt},
                          {"n_gen", m.test.n_gen},
                          {"n_depth", m.test.n_gen > 0 ? m.test.n_prompt : 0},
                          {"n_seqs", m.test.n_seqs},
                          {"avg_ts", m.mean},
                          {"stddev_ts", m.stddev},
                          {"samples_ts", m.tps},
                          {"samples_ns", samples_ns}});
  }
  j["peak_rss_bytes"] = rss;
  std::printf("%s\n", j.dump(2, ' ', false, ordered_json::error_handler_t::replace).c_str());
  return 0;
}

}  // namespace llmc::cli
