// `llmc logits`: teacher-forced logits for a fixed token sequence, for
// comparing llmc with a reference (tests, llama.cpp goldens). The first
// --prefill tokens run as one chunked prefill with logits for every row; each
// later token runs as its own decode step through the paged KV cache.
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "llmc/runtime/cli/commands.h"
#include "rank_entry.h"
#include "run_command.h"
#include "runner_flags.h"

namespace llmc::cli {

int RunLogitsCommand(int argc, char** argv) {
  std::string tokens_text, out_path;
  int64_t prefill = 0;
  RunnerFlags runner;
  FlagSet flags(std::string(argv[0]) + " ARTIFACT --tokens 1,2,3 --prefill N --out FILE",
                kLogitsSummary);
  flags.AddString("tokens", &tokens_text, "comma-separated token ids");
  flags.AddInt("prefill", &prefill, "tokens run as the prefill (0: all of them)");
  flags.AddString("out", &out_path, "write float32 logits [tokens, vocab] here", 'o');
  runner.Register(flags);
  if (auto rc = ParseCommandLine(flags, argc, argv)) return *rc;
  std::vector<int32_t> tokens;
  for (absl::string_view piece : absl::StrSplit(tokens_text, ',', absl::SkipWhitespace())) {
    int32_t id;
    if (!absl::SimpleAtoi(piece, &id)) {
      std::fprintf(stderr, "%s: --tokens: '%s' is not a token id\n", argv[0],
                   std::string(piece).c_str());
      return kExitUsage;
    }
    tokens.push_back(id);
  }
  if (flags.positional().size() != 1 || tokens.empty() || out_path.empty()) {
    std::fprintf(stderr, "%s: expected ARTIFACT, --tokens and --out (see --help)\n", argv[0]);
    return kExitUsage;
  }
  if (prefill <= 0 || prefill > int64_t(tokens.size())) prefill = int64_t(tokens.size());
  if (int rc = runner.ResolveBackend(argv[0], flags.positional()[0]); rc != 0) return rc;
  auto loaded = LoadForCommand(argv[0], flags.positional()[0], runner.Options(/*logits_rows=*/0));
  if (!loaded) return 1;
  if (loaded->follower()) return RunFollower(*loaded);
  auto gen = Generator::Create(std::move(loaded->model));
  if (!gen.ok()) {
    std::fprintf(stderr, "%s: %s\n", argv[0], std::string(gen.status().message()).c_str());
    return 1;
  }
  int64_t vocab = (*gen)->runner().vocab_size();
  std::vector<float> all(tokens.size() * size_t(vocab));
  auto st = (*gen)->Score(tokens, prefill, [&](int64_t i, std::span<const float> row) {
    std::copy(row.begin(), row.end(), all.begin() + i * vocab);
  });
  if (!st.ok()) {
    std::fprintf(stderr, "%s: %s\n", argv[0], std::string(st.message()).c_str());
    return 1;
  }
  FILE* f = std::fopen(out_path.c_str(), "wb");
  if (!f || std::fwrite(all.data(), sizeof(float), all.size(), f) != all.size()) {
    std::fprintf(stderr, "%s: cannot write %s\n", argv[0], out_path.c_str());
    if (f) std::fclose(f);
    return 1;
  }
  std::fclose(f);
  std::fprintf(stderr, "%s: %zu rows of logits on %s\n", argv[0], tokens.size(),
               (*gen)->runner().ExecutionSummary().c_str());
  return 0;
}

}  // namespace llmc::cli
