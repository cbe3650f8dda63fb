// `llmc bench --serving`: the serving engine under load, measured the way
// vLLM's benchmark_serving measures a server, in one process (no HTTP).
//
// N requests (synthetic prompts of --input-len tokens, the first
// --shared-prefix of them the same for all; or a --workload JSONL) arrive
// all at once or as a Poisson process of --request-rate per second; each
// generates exactly its output length (greedy, end-of-generation masked).
// The engine steps on this thread; a token's time is the end of the step
// that sampled it. Reported:
//   - request throughput, output tokens/s, total (prompt + output) tokens/s
//     over the whole run;
//   - generation tokens/s over the decode-only steps (every request in the
//     step decoding one token): what llama-batched-bench calls S_TG;
//   - time to first token (from the request's arrival), inter-token latency
//     (between consecutive tokens of a request; its max is the longest stall),
//     end-to-end latency: p50/p90/p99;
//   - prefix-cache hit rate (prompt tokens taken from the cache / prompt
//     tokens), prompt tokens computed, preemptions, KV-cache usage (peak and
//     mean over steps) and waste (slots allocated to live requests holding
//     no token, over all allocated slots).
// --save-requests writes each request's arrival and token times, for
// latencies over a window of the run (bench/chunked_prefill_itl.py: the
// decoders' inter-token latency while a long prompt is admitted).
#include "bench_serving.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <thread>

#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "engine_flags.h"
#include "llmc/core/status_macros.h"
#include "rank_entry.h"
#include "runner_flags.h"

namespace llmc::cli {
namespace {

using Clock = std::chrono::steady_clock;

struct WorkItem {
  std::vector<int32_t> prompt;
  int32_t output_len = 0;
  double arrival = 0;  // seconds after the start
};

struct Tracked {
  const WorkItem* item = nullptr;
  std::vector<double> token_times;  // seconds after the start
  bool finished = false;
  std::string error;
};

struct Percentiles {
  double p50 = 0, p90 = 0, p99 = 0, mean = 0, max = 0;
};

Percentiles Summarize(std::vector<double> v) {
  Percentiles p;
  if (v.empty()) return p;
  std::sort(v.begin(), v.end());
  auto at = [&](double q) {  // nearest rank
    size_t i = size_t(std::ceil(q * double(v.size())));
    return v[std::min(v.size() - 1, i == 0 ? 0 : i - 1)];
  };
  p.p50 = at(0.5);
  p.p90 = at(0.9);
  p.p99 = at(0.99);
  p.max = v.back();
  double sum = 0;
  for (double x : v) sum += x;
  p.mean = sum / double(v.size());
  return p;
}

std::vector<int32_t> RandomTokens(int64_t n, int64_t vocab, std::mt19937_64& rng) {
  std::vector<int32_t> ids(static_cast<size_t>(n), 0);
  // Away from the low ids, where the special tokens usually are.
  for (auto& t : ids) t = int32_t(vocab / 16 + int64_t(rng() % uint64_t(vocab - vocab / 16)));
  return ids;
}

// {"prompt_len": 512, "output_len": 64, "arrival": 1.5}, one per line.
absl::StatusOr<std::vector<WorkItem>> ReadWorkload(const std::string& path, int64_t vocab,
                                                   std::mt19937_64& rng) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrFormat("cannot read --workload %s", path));
  std::vector<WorkItem> items;
  std::string line;
  for (int64_t number = 1; std::getline(in, line); ++number) {
    if (line.empty() || line[0] == '#') continue;
    auto j = nlohmann::json::parse(line, nullptr, false);
    auto bad = [&](const char* what) {
      return absl::InvalidArgumentError(absl::StrFormat("%s:%d: %s", path, number, what));
    };
    if (!j.is_object()) return bad("expected a JSON object");
    auto plen = j.find("prompt_len"), olen = j.find("output_len"), arr = j.find("arrival");
    if (plen == j.end() || !plen->is_number_integer() || plen->get<int64_t>() < 1 ||
        plen->get<int64_t>() > (1 << 24))
      return bad("field 'prompt_len' must be an integer in [1, 2^24]");
    if (olen == j.end() || !olen->is_number_integer() || olen->get<int64_t>() < 1 ||
        olen->get<int64_t>() > (1 << 24))
      return bad("field 'output_len' must be an integer in [1, 2^24]");
    if (arr != j.end() && (!arr->is_number() || !(arr->get<double>() >= 0)))
      return bad("field 'arrival' must be seconds >= 0");
    WorkItem w;
    w.prompt = RandomTokens(plen->get<int64_t>(), vocab, rng);
    w.output_len = olen->get<int32_t>();
    w.arrival = arr == j.end() ? 0 : arr->get<double>();
    items.push_back(std::move(w));
  }
  if (items.empty()) return absl::InvalidArgumentError(absl::StrFormat("%s: no requests", path));
  std::stable_sort(items.begin(), items.end(),
                   [](const WorkItem& a, const WorkItem& b) { return a.arrival < b.arrival; });
  return items;
}

struct ServingFlags {
  int64_t requests = 64, input_len = 128, output_len = 128, shared_prefix = 0, seed = 1;
  double request_rate = 0;
  std::string workload, save_requests;
  bool json = false, progress = true, serving = true;
};

struct RunTotals {
  double seconds = 0;
  double decode_seconds = 0;  // decode-only steps
  int64_t decode_tokens = 0;
  double kv_usage_peak = 0, kv_usage_sum = 0;
  int64_t steps = 0;
};

// Steps the engine until every request of `work` ended.
absl::Status Drive(Engine& engine, const std::vector<WorkItem>& work, bool progress,
                   std::vector<Tracked>& tracked, RunTotals& totals) {
  tracked.assign(work.size(), {});
  std::unordered_map<RequestId, size_t> index;
  size_t next = 0, ended = 0;
  const Clock::time_point start = Clock::now();
  auto since = [&](Clock::time_point t) {
    return std::chrono::duration<double>(t - start).count();
  };
  double last_progress = 0;
  int64_t out_tokens = 0;
  while (ended < work.size()) {
    const double now = since(Clock::now());
    for (; next < work.size() && work[next].arrival <= now; ++next) {
      tracked[next].item = &work[next];
      SamplingParams p;
      p.temperature = 0;
      p.ignore_eos = true;
      p.max_tokens = work[next].output_len;
      auto id = engine.AddRequest(work[next].prompt, p);
      if (!id.ok()) {
        tracked[next].error = std::string(id.status().message());
        ++ended;
        continue;
      }
      index[*id] = next;
    }
    if (!engine.has_unfinished()) {
      if (next < work.size())
        std::this_thread::sleep_for(std::chrono::duration<double>(work[next].arrival - now));
      continue;
    }
    const Clock::time_point t0 = Clock::now();
    LLMC_ASSIGN_OR_RETURN(std::vector<RequestOutput> outs, engine.Step());
    const Clock::time_point t1 = Clock::now();
    const double t = since(t1);
    const SchedulerOutput& s = engine.last_schedule();
    bool decode_only = !s.chunks.empty();
    for (const ScheduledChunk& c : s.chunks)
      decode_only &= c.num_tokens == 1 && !tracked[index.at(c.id)].token_times.empty();
    if (decode_only) {
      totals.decode_seconds += std::chrono::duration<double>(t1 - t0).count();
      totals.decode_tokens += int64_t(s.chunks.size());
    }
    const double usage = engine.stats().kv.usage;
    totals.kv_usage_peak = std::max(totals.kv_usage_peak, usage);
    totals.kv_usage_sum += usage;
    ++totals.steps;
    for (const RequestOutput& o : outs) {
      Tracked& tr = tracked[index.at(o.id)];
      for (size_t k = 0; k < o.tokens.size(); ++k) tr.token_times.push_back(t);
      out_tokens += int64_t(o.tokens.size());
      if (o.finished) {
        tr.finished = true;
        if (!o.status.ok()) tr.error = std::string(o.status.message());
        ++ended;
      }
    }
    if (progress && t - last_progress >= 0.5) {
      last_progress = t;
      std::fprintf(stderr, "\r  %6.1f s  %zu/%zu requests done, %d running, %lld tokens out   ", t,
                   ended, work.size(), engine.num_unfinished(), (long long)out_tokens);
      std::fflush(stderr);
    }
  }
  if (progress) std::fprintf(stderr, "\r%*s\r", 72, "");
  totals.seconds = since(Clock::now());
  return absl::OkStatus();
}

// One JSON object per request, in arrival order: its lengths, arrival and
// the time of each of its tokens (seconds after the start), or its error.
absl::Status SaveRequests(std::ofstream& out, const std::string& path,
                          const std::vector<Tracked>& tracked) {
  for (const Tracked& tr : tracked) {
    nlohmann::ordered_json j;
    j["prompt_len"] = tr.item->prompt.size();
    j["output_len"] = tr.item->output_len;
    j["arrival"] = tr.item->arrival;
    j["token_times"] = tr.token_times;
    if (!tr.error.empty()) j["error"] = tr.error;
    out << j.dump() << "\n";
  }
  out.close();
  if (!out) return absl::DataLossError(absl::StrFormat("writing %s failed", path));
  return absl::OkStatus();
}

int Fail(const char* self, const absl::Status& st, int code) {
  std::fprintf(stderr, "%s: %s\n", self, std::string(st.message()).c_str());
  return code;
}

absl::StatusOr<std::vector<WorkItem>> MakeWorkload(const ServingFlags& f, int64_t vocab,
                                                   std::mt19937_64& rng) {
  if (!f.workload.empty()) return ReadWorkload(f.workload, vocab, rng);
  std::vector<WorkItem> work;
  const std::vector<int32_t> prefix = RandomTokens(f.shared_prefix, vocab, rng);
  std::exponential_distribution<double> gap(f.request_rate > 0 ? f.request_rate : 1);
  double t = 0;
  for (int64_t i = 0; i < f.requests; ++i) {
    WorkItem w;
    w.prompt = prefix;
    std::vector<int32_t> own = RandomTokens(f.input_len - f.shared_prefix, vocab, rng);
    w.prompt.insert(w.prompt.end(), own.begin(), own.end());
    w.output_len = int32_t(f.output_len);
    if (f.request_rate > 0 && i > 0) t += gap(rng);
    w.arrival = t;
    work.push_back(std::move(w));
  }
  return work;
}

// Every number of the run, as `--json` prints it (the table reads it too).
nlohmann::ordered_json Results(Engine& e, const EngineOptions& options, const ServingFlags& f,
                               const std::string& artifact, const std::vector<WorkItem>& work,
                               const std::vector<Tracked>& tracked, const RunTotals& totals) {
  std::vector<double> ttft, itl, e2e;
  int64_t out_tokens = 0, prompt_tokens = 0, failed = 0;
  for (const Tracked& tr : tracked) {
    prompt_tokens += int64_t(tr.item->prompt.size());
    if (!tr.error.empty() || tr.token_times.empty()) {
      ++failed;
      continue;
    }
    out_tokens += int64_t(tr.token_times.size());
    ttft.push_back(tr.token_times.front() - tr.item->arrival);
    e2e.push_back(tr.token_times.back() - tr.item->arrival);
    for (size_t k = 1; k < tr.token_times.size(); ++k)
      itl.push_back(tr.token_times[k] - tr.token_times[k - 1]);
  }
  const Percentiles pt = Summarize(ttft), pi = Summarize(itl), pe = Summarize(e2e);
  const EngineStats s = e.stats();
  const double hit_rate = s.scheduler.prompt_tokens > 0 ? double(s.scheduler.prefix_hit_tokens) /
                                                              double(s.scheduler.prompt_tokens)
                                                        : 0;
  const double waste =
      s.kv_slots_allocated > 0 ? double(s.kv_slots_wasted) / double(s.kv_slots_allocated) : 0;
  const double secs = std::max(totals.seconds, 1e-9);
  const double gen_tps =
      totals.decode_seconds > 0 ? double(totals.decode_tokens) / totals.decode_seconds : 0;
  nlohmann::ordered_json j;
  j["artifact"] = artifact;
  j["where"] = e.runner().ExecutionSummary();
  j["requests"] = work.size();
  j["failed"] = failed;
  j["request_rate"] = f.request_rate;
  j["max_batch_tokens"] = e.runner().max_batch_tokens();
  j["max_seqs"] = options.max_seqs;
  j["block_size"] = e.runner().block_size();
  j["kv_blocks"] = e.runner().num_blocks();
  j["prefix_caching"] = options.enable_prefix_caching;
  j["duration_s"] = totals.seconds;
  j["request_throughput"] = double(work.size() - size_t(failed)) / secs;
  j["output_tokens"] = out_tokens;
  j["output_tokens_per_s"] = double(out_tokens) / secs;
  j["total_tokens_per_s"] = double(out_tokens + prompt_tokens) / secs;
  j["generation_tokens_per_s"] = gen_tps;
  auto pct = [](const Percentiles& p) {
    return nlohmann::ordered_json{{"mean", p.mean * 1e3},
                                  {"p50", p.p50 * 1e3},
                                  {"p90", p.p90 * 1e3},
                                  {"p99", p.p99 * 1e3},
                                  {"max", p.max * 1e3}};
  };
  j["ttft_ms"] = pct(pt);
  j["itl_ms"] = pct(pi);
  j["e2e_ms"] = pct(pe);
  j["prompt_tokens"] = s.scheduler.prompt_tokens;
  j["computed_prompt_tokens"] = s.scheduler.computed_prompt_tokens;
  j["prefix_cache_hit_rate"] = hit_rate;
  j["preemptions"] = s.scheduler.num_preemptions;
  j["steps"] = totals.steps;
  j["kv_usage_peak"] = totals.kv_usage_peak;
  j["kv_usage_mean"] = totals.steps > 0 ? totals.kv_usage_sum / double(totals.steps) : 0;
  j["kv_waste"] = waste;
  // Issue 27's measure: the host's time per step against the step's own
  // (the runner's Submit and Collect: on a GPU, its kernels).
  const double steps = double(std::max<int64_t>(s.steps, 1));
  j["runner_ms_per_step"] = s.runner_seconds / steps * 1e3;
  j["host_ms_per_step"] = s.host_seconds / steps * 1e3;
  j["host_share_of_runner"] = s.runner_seconds > 0 ? s.host_seconds / s.runner_seconds : 0;
  // Asynchronous scheduling: steps submitted while the one before ran, and
  // the tokens they took from it on the device.
  j["steps_ahead_share"] = double(s.steps_ahead) / steps;
  j["fed_tokens"] = s.fed_tokens;
  return j;
}

void PrintTable(const nlohmann::ordered_json& j, const std::string& kv) {
  const double rate = j["request_rate"].get<double>();
  std::printf(
      "llmc bench --serving: %s; %s; %lld requests (%s), batch %lld tokens, max-seqs %lld, "
      "%s\n",
      j["artifact"].get<std::string>().c_str(), j["where"].get<std::string>().c_str(),
      (long long)j["requests"].get<int64_t>(),
      rate > 0 ? absl::StrFormat("%.2f/s Poisson", rate).c_str() : "all at once",
      (long long)j["max_batch_tokens"].get<int64_t>(), (long long)j["max_seqs"].get<int64_t>(),
      kv.c_str());
  std::printf(
      "| metric                           |      value |\n"
      "| -------------------------------- | ---------: |\n");
  auto row = [](const char* name, double v) { std::printf("| %-32s | %10.2f |\n", name, v); };
  auto get = [&](const char* a, const char* b = nullptr) {
    return b ? j[a][b].get<double>() : j[a].get<double>();
  };
  row("duration (s)", get("duration_s"));
  row("requests/s", get("request_throughput"));
  row("output tok/s", get("output_tokens_per_s"));
  row("total tok/s", get("total_tokens_per_s"));
  row("generation tok/s (decode steps)", get("generation_tokens_per_s"));
  for (const char* p : {"p50", "p90", "p99"})
    row(absl::StrFormat("TTFT %s (ms)", p).c_str(), get("ttft_ms", p));
  for (const char* p : {"p50", "p90", "p99", "max"})
    row(absl::StrFormat("ITL %s (ms)", p).c_str(), get("itl_ms", p));
  row("E2E latency p50 (ms)", get("e2e_ms", "p50"));
  row("prefix-cache hit rate (%)", get("prefix_cache_hit_rate") * 100);
  row("prompt tokens computed", get("computed_prompt_tokens"));
  row("preemptions", get("preemptions"));
  row("KV usage peak (%)", get("kv_usage_peak") * 100);
  row("KV waste (%)", get("kv_waste") * 100);
  row("runner ms/step", get("runner_ms_per_step"));
  row("host ms/step (outside runner)", get("host_ms_per_step"));
  row("host / runner time (%)", get("host_share_of_runner") * 100);
  row("steps scheduled ahead (%)", get("steps_ahead_share") * 100);
  row("tokens fed on the device", get("fed_tokens"));
}

}  // namespace

bool WantsServingBench(int argc, char** argv) {
  for (int i = 1; i < argc; ++i)
    if (std::string_view(argv[i]) == "--serving") return true;
  return false;
}

namespace {

// The serving benchmark's own flags and the engine's; `runner` registers
// its flags into the set separately (`llmc bench` has them too).
FlagSet ServingFlagSet(const char* argv0, ServingFlags& f, EngineFlags& eng, RunnerFlags& runner) {
  FlagSet flags(std::string(argv0) +
                    " ARTIFACT --serving [--requests 64 --input-len 128 --output-len 128] "
                    "[--request-rate R] [--workload FILE.jsonl] [--json]",
                "Measure the serving engine under load: throughput, TTFT, inter-token latency, "
                "prefix caching, preemption, KV-cache use.");
  flags.AddBool("serving", &f.serving, "the serving benchmark (this one)");
  flags.AddInt("requests", &f.requests, "number of requests", 'N');
  flags.AddInt("input-len", &f.input_len, "prompt tokens of each request");
  flags.AddInt("output-len", &f.output_len, "tokens each request generates");
  flags.AddInt("shared-prefix", &f.shared_prefix,
               "the first this many prompt tokens are the same in every request (a system prompt)");
  flags.AddDouble("request-rate", &f.request_rate,
                  "requests per second, Poisson arrivals (0: all at once)");
  flags.AddString("workload", &f.workload,
                  "JSONL requests {\"prompt_len\", \"output_len\", \"arrival\"} instead of the "
                  "synthetic ones");
  flags.AddInt("seed", &f.seed, "seed of the synthetic prompts and arrivals");
  flags.AddString("save-requests", &f.save_requests,
                  "write each request's arrival and token times (seconds) to this JSONL file");
  flags.AddBool("progress", &f.progress, "a progress line on stderr while it runs");
  flags.AddBool("json", &f.json, "print the results as JSON");
  eng.Register(flags, runner);
  return flags;
}

}  // namespace

std::string ServingBenchUsage(const char* argv0) {
  ServingFlags f;
  EngineFlags eng;
  RunnerFlags runner;
  return ServingFlagSet(argv0, f, eng, runner).Usage();
}

int RunServingBench(int argc, char** argv) {
  ServingFlags f;
  RunnerFlags runner;
  EngineFlags eng;
  FlagSet flags = ServingFlagSet(argv[0], f, eng, runner);
  runner.Register(flags);
  const char* self = argv[0];
  if (auto rc = ParseCommandLine(flags, argc, argv)) return *rc;
  auto bad = [&](std::string m) { return Fail(self, absl::InvalidArgumentError(m), kExitUsage); };
  if (flags.positional().size() != 1) return bad("expected one ARTIFACT (see --help)");
  if (f.requests < 1) return bad("flag --requests must be >= 1");
  if (f.input_len < 1 || f.output_len < 1)
    return bad("flags --input-len and --output-len must be >= 1");
  if (f.shared_prefix < 0 || f.shared_prefix > f.input_len)
    return bad("flag --shared-prefix must be in [0, --input-len]");
  if (f.request_rate < 0) return bad("flag --request-rate must be >= 0");
  if (int rc = runner.ResolveBackend(self, flags.positional()[0]); rc != 0) return rc;
  LoadOptions load = runner.Options();
  EngineOptions options;
  if (absl::Status st = eng.Apply(load, options); !st.ok()) return Fail(self, st, kExitUsage);
  auto loaded = LoadForCommand(self, flags.positional()[0], load);
  if (!loaded) return 1;
  if (loaded->follower()) return RunFollower(*loaded);
  auto engine = Engine::Create(std::move(loaded->model), options);
  if (!engine.ok()) return Fail(self, engine.status(), 1);
  Engine& e = **engine;

  std::mt19937_64 rng(uint64_t(f.seed));
  const int64_t vocab = std::min(e.runner().vocab_size(), e.tokenizer().vocab_size());
  auto work_or = MakeWorkload(f, vocab, rng);
  if (!work_or.ok()) return Fail(self, work_or.status(), kExitUsage);
  const std::vector<WorkItem> work = *std::move(work_or);
  if (f.progress && !f.json) std::fprintf(stderr, "%s: %s\n", self, e.KvCacheSummary().c_str());
  // Opened before the run, so that a path it cannot write fails at once.
  std::ofstream save;
  if (!f.save_requests.empty()) {
    save.open(f.save_requests);
    if (!save)
      return Fail(self,
                  absl::PermissionDeniedError(
                      absl::StrFormat("cannot write --save-requests %s", f.save_requests)),
                  kExitUsage);
  }
  std::vector<Tracked> tracked;
  RunTotals totals;
  if (absl::Status st = Drive(e, work, f.progress && isatty(2), tracked, totals); !st.ok())
    return Fail(self, st, 1);

  if (save.is_open()) {
    if (absl::Status st = SaveRequests(save, f.save_requests, tracked); !st.ok())
      return Fail(self, st, 1);
  }
  const nlohmann::ordered_json j =
      Results(e, options, f, flags.positional()[0], work, tracked, totals);
  const int64_t failed = j["failed"].get<int64_t>();
  if (f.json) {
    std::printf("%s\n", j.dump(2).c_str());
    return failed > 0 ? 1 : 0;
  }
  PrintTable(j, e.KvCacheSummary());
  if (failed > 0) std::printf("%lld requests failed\n", (long long)failed);
  return failed > 0 ? 1 : 0;
}

}  // namespace llmc::cli
