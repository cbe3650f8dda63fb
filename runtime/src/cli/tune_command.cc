// `llmc tune ARTIFACT`: for every CUDA kernel whose GEMM cuBLASLt may run
// instead (16-bit activations; manifest kernels[i].gemm), times the
// generated GEMV/GEMM and the cuBLASLt path (for a quantized weight its
// dequantization, then pre launch, matmul, epi launch) inside real prefill steps of --rows tokens, and writes the
// faster per kernel and row count to ARTIFACT/tune.json (or -o), which
// `--gemm=auto` then follows on the same GPU.
//
// `llmc tune ARTIFACT --predict [--device h200]` needs no GPU: it writes the
// choices the kernel report's performance model predicts for a GPU of its
// table (inspect_kernels.h: PredictGemms, the same numbers as `llmc inspect
// --kernels`), marked "predicted", which --gemm=auto follows on a GPU of
// that family until a measured tune.json replaces them.
//
// A step of R tokens is one sequence's prefill with logits for every row
// (so the LM head's GEMM has R rows too); each runs once untimed, then
// --iters times with events between the step's kernels (CudaRunner's
// profile_kernels), on one runner whose GEMM policy switches from the
// generated GEMMs to cuBLASLt. A kernel's time includes everything of its
// step entry (its RoPE or epilogue launches too), the same on both sides.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "llmc/runtime/cli/commands.h"
#include "llmc/runtime/exec/cuda_runner.h"
#include "llmc/runtime/exec/gemm_tuning.h"
#include "llmc/core/status_macros.h"
#include "inspect_kernels.h"
#include "rank_entry.h"
#include "run_command.h"
#include "runner_flags.h"

namespace llmc::cli {
namespace {

// Milliseconds per step of each kernel at each row count, [rows][kernel],
// on `runner` (the generator's) as its GEMM policy stands. A step of R rows
// is an engine score request of R synthetic tokens: one prefill step with
// logits for every row.
absl::StatusOr<std::vector<std::vector<double>>> TimeKernels(Generator& gen, CudaRunner& runner,
                                                             const std::vector<int64_t>& rows,
                                                             int64_t iters) {
  std::vector<std::vector<double>> out;
  auto ignore = [](int64_t, std::span<const float>) {};
  for (int64_t r : rows) {
    std::vector<int32_t> tokens;
    for (int64_t i = 0; i < r; ++i) tokens.push_back(int32_t((i * 7919 + 13) % runner.vocab_size()));
    LLMC_RETURN_IF_ERROR(gen.Score(tokens, ignore));  // warm-up (JIT, cuBLASLt heuristics)
    runner.ResetKernelTimes();
    for (int64_t i = 0; i < iters; ++i) LLMC_RETURN_IF_ERROR(gen.Score(tokens, ignore));
    std::vector<double> ms = runner.KernelTimes();
    for (double& v : ms) v /= double(iters);
    out.push_back(std::move(ms));
  }
  return out;
}

// One table row of what tune chose.
void PrintChoice(const std::string& kernel, const GemmTuneEntry& e) {
  std::printf("| %-48.48s | %6lld | %10.1f | %12.1f | %-8s |\n", kernel.c_str(),
              static_cast<long long>(e.max_rows), e.llmc_us, e.cublaslt_us,
              e.cublaslt ? "cublaslt" : "llmc");
}

// `tuning` to `path`, whole or not at all (through a temporary file).
int WriteTuning(const char* self, const GemmTuning& tuning, const std::string& path) {
  std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << GemmTuningToJson(tuning);
    if (!out) {
      std::fprintf(stderr, "%s: %s: cannot write\n", self, tmp.c_str());
      std::remove(tmp.c_str());
      return 1;
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::fprintf(stderr, "%s: %s: cannot rename to %s\n", self, tmp.c_str(), path.c_str());
    std::remove(tmp.c_str());
    return 1;
  }
  return 0;
}

// --predict: the kernel report's choices for `device`, per row count (a
// prefill of that many tokens with logits for every row, as the timed
// steps are).
int PredictTuning(const char* self, const std::string& dir, const std::string& device,
                  const std::vector<int64_t>& rows, const std::string& out_path) {
  Artifact::OpenOptions open;
  open.verify_checksum = false;  // the model reads the manifest and the PTX, not the weights
  auto artifact = Artifact::Open(dir, open);
  if (!artifact.ok()) {
    std::fprintf(stderr, "%s: %s\n", self, std::string(artifact.status().message()).c_str());
    return 1;
  }
  if ((*artifact)->manifest().cuda.modules.empty()) {
    std::fprintf(stderr, "%s: %s has no CUDA kernels to predict (compile it with --target=sm_XX)\n",
                 self, dir.c_str());
    return 1;
  }
  std::vector<ReportShape> shapes;
  for (int64_t r : rows) {
    ReportShape s = PrefillShape(r);
    s.cost.logits = s.vars.logits = r;
    shapes.push_back(s);
  }
  auto predicted = PredictGemms(**artifact, device, shapes);
  if (!predicted.ok()) {
    std::fprintf(stderr, "%s: %s\n", self, std::string(predicted.status().message()).c_str());
    return 1;
  }
  GemmTuning tuning;
  tuning.source = "predicted";
  tuning.device = predicted->device;
  for (size_t i = 0; i < rows.size(); ++i)
    for (const PredictedGemm& g : predicted->by_shape[i]) {
      GemmTuneEntry e;
      e.max_rows = rows[i];
      e.llmc_us = 1e6 * g.own_s;
      e.cublaslt_us = 1e6 * g.cublaslt_s;
      e.cublaslt = g.cublaslt_s < g.own_s;
      tuning.kernels[g.kernel].push_back(e);
    }
  std::printf("| %-48s | %6s | %10s | %12s | %-8s |\n", "kernel (predicted)", "rows", "llmc us",
              "cublaslt us", "choice");
  for (const auto& [kernel, entries] : tuning.kernels)
    for (const GemmTuneEntry& e : entries) PrintChoice(kernel, e);
  if (tuning.kernels.empty())
    std::fprintf(stderr, "%s: no GEMM of %s can run on cuBLASLt (it takes 16-bit activations); "
                 "writing an empty tuning\n", self, dir.c_str());
  if (int rc = WriteTuning(self, tuning, out_path); rc != 0) return rc;
  std::fprintf(stderr, "%s: wrote %s (predicted for %s by the kernel report's model, not "
               "measured); run with --gemm=auto on that GPU\n", self, out_path.c_str(),
               tuning.device.c_str());
  return 0;
}

}  // namespace

int RunTuneCommand(int argc, char** argv) {
  RunnerFlags runner;
  std::string rows_text = "1,16,128,512", out_path;
  int64_t iters = 10;
  FlagSet flags(std::string(argv[0]) + " ARTIFACT [--rows 1,16,128,512] [-o FILE]", kTuneSummary);
  flags.AddString("rows", &rows_text, "GEMM row counts (prefill tokens) to time");
  flags.AddInt("iters", &iters, "timed steps per row count");
  flags.AddString("out", &out_path, "where to write the choices (default ARTIFACT/tune.json)", 'o');
  bool predict = false;
  std::string device;
  flags.AddBool("predict", &predict,
                "no GPU: write the kernel report's predicted choices for --device instead of "
                "measuring (default rows 1,8,16,32,64,128,256,512,1024,2048)");
  flags.AddString("device", &device,
                  "with --predict: a GPU of the performance model's table (h200, a100, sm_90, "
                  "...; default: the artifact's first CUDA arch)");
  runner.Register(flags);
  if (auto rc = ParseCommandLine(flags, argc, argv)) return *rc;
  if (predict && rows_text == "1,16,128,512") rows_text = "1,8,16,32,64,128,256,512,1024,2048";
  std::vector<int64_t> rows;
  for (absl::string_view piece : absl::StrSplit(rows_text, ',', absl::SkipWhitespace())) {
    int64_t r;
    if (!absl::SimpleAtoi(piece, &r) || r < 1) {
      std::fprintf(stderr, "%s: --rows: '%s' is not a positive row count\n", argv[0],
                   std::string(piece).c_str());
      return kExitUsage;
    }
    rows.push_back(r);
  }
  std::sort(rows.begin(), rows.end());
  rows.erase(std::unique(rows.begin(), rows.end()), rows.end());
  if (flags.positional().size() != 1 || rows.empty() || iters < 1) {
    std::fprintf(stderr, "%s: expected ARTIFACT, --rows and --iters >= 1 (see --help)\n", argv[0]);
    return kExitUsage;
  }
  const std::string dir = flags.positional()[0];
  if (out_path.empty()) out_path = DefaultTuneFile(dir);
  if (predict) return PredictTuning(argv[0], dir, device, rows, out_path);
  if (!device.empty()) {
    std::fprintf(stderr, "%s: --device goes with --predict (a measured tuning is of this GPU)\n",
                 argv[0]);
    return kExitUsage;
  }
  runner.backend = "cuda";
  runner.batch = rows.back();
  if (runner.ctx < rows.back()) runner.ctx = rows.back();
  if (int rc = runner.ResolveBackend(argv[0], dir); rc != 0) return rc;
  GeneratorOptions options = runner.Options(/*logits_rows=*/rows.back());
  if (options.backend.backend != Backend::kCuda || !options.backend.device) {
    std::fprintf(stderr, "%s: llmc tune needs a GPU and an artifact with CUDA kernels for it\n",
                 argv[0]);
    return 1;
  }
  // One runner set up for cuBLASLt, timed with the generated GEMMs and then
  // with cuBLASLt's (the weights load once).
  options.runner.gemm = "cublaslt";
  options.runner.profile_kernels = true;
  auto loaded = LoadForCommand(argv[0], dir, options);
  if (!loaded) return 1;
  if (loaded->follower()) return RunFollower(*loaded);
  auto gen = Generator::Create(std::move(loaded->model));
  auto fail = [&](const absl::Status& st) {
    std::fprintf(stderr, "%s: %s\n", argv[0], std::string(st.message()).c_str());
    return 1;
  };
  if (!gen.ok()) return fail(gen.status());
  auto* cuda = dynamic_cast<CudaRunner*>(&(*gen)->runner());
  if (cuda == nullptr) return fail(absl::FailedPreconditionError("llmc tune needs the CUDA backend"));
  const std::vector<ManifestCudaKernel>& kernels = (*gen)->artifact().manifest().cuda.kernels;
  const std::string version = cuda->CublasLtVersion();
  GemmPolicy own, lt_everywhere;
  lt_everywhere.mode = GemmPolicy::Mode::kCublasLt;
  if (absl::Status st = cuda->SetGemmPolicy(own); !st.ok()) return fail(st);
  auto own_ms = TimeKernels(**gen, *cuda, rows, iters);
  if (!own_ms.ok()) return fail(own_ms.status());
  if (!version.empty())
    if (absl::Status st = cuda->SetGemmPolicy(lt_everywhere); !st.ok()) return fail(st);
  auto lt_ms = TimeKernels(**gen, *cuda, rows, iters);
  if (!lt_ms.ok()) return fail(lt_ms.status());
  GemmTuning tuning;
  tuning.device = options.backend.device->name;
  tuning.cublaslt = version;
  std::printf("| %-48s | %6s | %10s | %12s | %-8s |\n", "kernel", "rows", "llmc us",
              "cublaslt us", "choice");
  for (size_t k = 0; k < kernels.size(); ++k) {
    if (kernels[k].gemm.n == 0) continue;
    std::vector<GemmTuneEntry>& entries = tuning.kernels[kernels[k].name];
    for (size_t i = 0; i < rows.size(); ++i) {
      GemmTuneEntry e;
      e.max_rows = rows[i];
      e.llmc_us = 1e3 * (*own_ms)[i][k];
      e.cublaslt_us = 1e3 * (*lt_ms)[i][k];
      e.cublaslt = e.cublaslt_us < e.llmc_us;
      entries.push_back(e);
      PrintChoice(kernels[k].name, e);
    }
  }
  if (tuning.kernels.empty())
    std::fprintf(stderr, "%s: no GEMM of %s can run on cuBLASLt (it takes 16-bit weights of the "
                 "activation type); writing an empty tuning\n", argv[0], dir.c_str());
  if (int rc = WriteTuning(argv[0], tuning, out_path); rc != 0) return rc;
  std::fprintf(stderr, "%s: wrote %s (on %s, cuBLASLt %s); run with --gemm=auto\n", argv[0],
               out_path.c_str(), tuning.device.c_str(), version.c_str());
  return 0;
}

}  // namespace llmc::cli
