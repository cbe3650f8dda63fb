// cuBLASLt GEMMs without a GPU: which launches a policy puts in place of a
// kernel's own GEMM (ApplyGemmPolicy), and the tune file `llmc tune` writes
// and --gemm=auto reads (GemmTuning).
#include "llmc/runtime/exec/gemm_tuning.h"

#include <gtest/gtest.h>

#include "core/artifact/artifact_test_util.h"

namespace llmc {
namespace {

using test::TinyCudaManifest;

// The tiny manifest's LM head (kernel 2: a GEMV and a GEMM over L rows)
// offering a cuBLASLt GEMM, and a RoPE launch after its GEMMs.
Manifest WithGemm() {
  Manifest m = TinyCudaManifest();
  ManifestCudaKernel& head = m.cuda.kernels[2];
  for (ManifestCudaLaunch& l : head.launches) l.impl = "llmc";
  head.launches.push_back({"llmc_cuda_head_rope", "", {"T", "1", "1"}, 64, ""});
  head.gemm = {/*n=*/64, /*k=*/64, /*columns=*/64, /*weight=*/1, "L", "llmc_cuda_head_lt_pre",
               "llmc_cuda_head_lt_epi"};
  return m;
}

std::vector<SelectedLaunch> Select(const Manifest& m, const GemmPolicy& policy, LaunchVars vars) {
  auto parsed = ParseCudaLaunches(m.cuda);
  EXPECT_TRUE(parsed.ok()) << parsed.status();
  std::vector<SelectedLaunch> got;
  EXPECT_TRUE(SelectLaunches(m.cuda, *parsed, vars, 100, 0, &got).ok());
  ApplyGemmPolicy(m.cuda, policy, vars, &got);
  return got;
}

TEST(GemmPolicy, OwnKernelsByDefault) {
  Manifest m = WithGemm();
  auto got = Select(m, GemmPolicy{}, {.tokens = 20, .logits = 20, .queries = 20, .seqs = 1});
  ASSERT_EQ(got.size(), 5u);  // embed, 2 attention steps, the head's GEMM and RoPE
  EXPECT_EQ(got[3].kind, LaunchKind::kKernel);
  EXPECT_EQ(got[3].launch, 1u);  // the tensor-core GEMM: L > 8
  EXPECT_EQ(got[4].launch, 2u);
}

TEST(GemmPolicy, CublasLtReplacesTheOwnGemmInPlace) {
  Manifest m = WithGemm();
  GemmPolicy lt;
  lt.mode = GemmPolicy::Mode::kCublasLt;
  auto got = Select(m, lt, {.tokens = 20, .logits = 300, .queries = 20, .seqs = 1});
  ASSERT_EQ(got.size(), 7u);
  EXPECT_EQ(got[3].kind, LaunchKind::kGemmPre);
  EXPECT_EQ(got[3].grid, (std::array<unsigned, 3>{300, 1, 1}));  // L rows, not T
  EXPECT_EQ(got[4].kind, LaunchKind::kGemmMatmul);
  EXPECT_EQ(got[4].rows, 300);
  EXPECT_EQ(got[5].kind, LaunchKind::kGemmEpi);
  EXPECT_EQ(got[5].grid, (std::array<unsigned, 3>{1, 300, 1}));  // cdiv(64, 128) x rows
  EXPECT_EQ(got[6].kind, LaunchKind::kKernel);  // the RoPE stays, after the GEMM
  EXPECT_EQ(got[6].launch, 2u);
  for (size_t i = 3; i < 6; ++i) EXPECT_EQ(got[i].step, got[6].step);
  // Graph keys see the difference.
  EXPECT_FALSE(SameLaunches(got, Select(m, GemmPolicy{}, {.tokens = 20, .logits = 300})));
}

TEST(GemmPolicy, AQuantizedWeightIsDequantizedFirst) {
  Manifest m = WithGemm();
  m.cuda.kernels[2].gemm.deq = "llmc_cuda_head_lt_deq";
  GemmPolicy lt;
  lt.mode = GemmPolicy::Mode::kCublasLt;
  auto got = Select(m, lt, {.tokens = 20, .logits = 300, .queries = 20, .seqs = 1});
  ASSERT_EQ(got.size(), 8u);
  EXPECT_EQ(got[3].kind, LaunchKind::kGemmDequant);
  EXPECT_EQ(got[3].grid, (std::array<unsigned, 3>{2, 1, 1}));  // cdiv(64 * 64 / 8, 256)
  EXPECT_EQ(got[3].block, 256);
  EXPECT_EQ(got[4].kind, LaunchKind::kGemmPre);
  EXPECT_EQ(got[4].block, 128);
  EXPECT_EQ(got[5].kind, LaunchKind::kGemmMatmul);
  EXPECT_EQ(got[6].kind, LaunchKind::kGemmEpi);
  EXPECT_EQ(got[7].kind, LaunchKind::kKernel);  // the RoPE
  for (size_t i = 3; i < 7; ++i) EXPECT_EQ(got[i].step, got[7].step);
}

TEST(GemmPolicy, KernelsWithoutAGemmKeepTheirOwn) {
  Manifest m = TinyCudaManifest();  // no kernel offers one
  GemmPolicy lt;
  lt.mode = GemmPolicy::Mode::kCublasLt;
  for (const SelectedLaunch& s : Select(m, lt, {.tokens = 3, .logits = 3, .queries = 3, .seqs = 1}))
    EXPECT_EQ(s.kind, LaunchKind::kKernel);
}

TEST(GemmPolicy, TunedByRowCount) {
  Manifest m = WithGemm();
  GemmTuning t;
  t.device = "NVIDIA H200";
  t.kernels["lm_head"] = {{1, false, 5, 9}, {128, true, 50, 20}};
  t.kernels["no such kernel"] = {{1, true, 9, 5}};
  m.cuda.kernels[2].name = "lm_head";
  GemmPolicy p = PolicyFromTuning(m.cuda, t);
  EXPECT_FALSE(p.UsesCublasLt(m.cuda, 2, 1));
  EXPECT_TRUE(p.UsesCublasLt(m.cuda, 2, 2));     // the first entry covering 2 rows: 128
  EXPECT_TRUE(p.UsesCublasLt(m.cuda, 2, 4096));  // past the last: the last
  EXPECT_FALSE(p.UsesCublasLt(m.cuda, 0, 4096)); // no gemm
  auto got = Select(m, p, {.tokens = 1, .logits = 1, .queries = 1, .seqs = 1});
  EXPECT_EQ(got[3].kind, LaunchKind::kKernel);
  got = Select(m, p, {.tokens = 64, .logits = 64, .queries = 64, .seqs = 1});
  EXPECT_EQ(got[3].kind, LaunchKind::kGemmPre);
}

// The runner allocates cuBLASLt's operands only for kernels a policy may
// give to it at some row count (the LM head's dequantized weight is 1 GB).
TEST(GemmPolicy, MayUseCublasLtAtSomeRowCount) {
  Manifest m = WithGemm();
  m.cuda.kernels[2].name = "lm_head";
  GemmTuning t;
  t.kernels["lm_head"] = {{1, false, 5, 9}, {128, false, 50, 60}};
  EXPECT_FALSE(PolicyFromTuning(m.cuda, t).MayUseCublasLt(m.cuda, 2));
  t.kernels["lm_head"].push_back({512, true, 400, 300});
  EXPECT_TRUE(PolicyFromTuning(m.cuda, t).MayUseCublasLt(m.cuda, 2));
  EXPECT_FALSE(PolicyFromTuning(m.cuda, t).MayUseCublasLt(m.cuda, 0));  // no gemm
  GemmPolicy lt;
  lt.mode = GemmPolicy::Mode::kCublasLt;
  EXPECT_TRUE(lt.MayUseCublasLt(m.cuda, 2));
  EXPECT_FALSE(lt.MayUseCublasLt(m.cuda, 0));
  EXPECT_FALSE(GemmPolicy{}.MayUseCublasLt(m.cuda, 2));
}

TEST(GemmTuning, RoundTrips) {
  GemmTuning t;
  t.device = "NVIDIA H200";
  t.cublaslt = "13.0.2";
  t.kernels["layers.0.mlp"] = {{1, false, 12.5, 30.25}, {512, true, 400, 250}};
  std::string text = GemmTuningToJson(t);
  auto back = ParseGemmTuning(text, "tune.json");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->device, t.device);
  EXPECT_EQ(back->cublaslt, t.cublaslt);
  ASSERT_EQ(back->kernels.size(), 1u);
  const auto& e = back->kernels.at("layers.0.mlp");
  ASSERT_EQ(e.size(), 2u);
  EXPECT_EQ(e[1].max_rows, 512);
  EXPECT_TRUE(e[1].cublaslt);
  EXPECT_FALSE(e[0].cublaslt);
  EXPECT_DOUBLE_EQ(e[0].cublaslt_us, 30.25);
}

TEST(GemmTuning, SourceRoundTripsAndDefaultsToMeasured) {
  GemmTuning t;
  t.source = "predicted";
  t.device = "H200";
  auto back = ParseGemmTuning(GemmTuningToJson(t), "tune.json");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->source, "predicted");
  back = ParseGemmTuning(R"({"device": "d", "cublaslt": "1", "kernels": {}})", "old.json");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->source, "measured");
}

// A measured tuning holds on the GPU it was measured on; a predicted one on
// any GPU of the model's family.
TEST(GemmTuning, AppliesToItsGpu) {
  GemmTuning measured;
  measured.device = "NVIDIA H200";
  EXPECT_TRUE(TuningAppliesTo(measured, "NVIDIA H200"));
  EXPECT_FALSE(TuningAppliesTo(measured, "NVIDIA H200 NVL"));
  EXPECT_FALSE(TuningAppliesTo(measured, "H200"));
  GemmTuning predicted;
  predicted.source = "predicted";
  predicted.device = "H200";
  EXPECT_TRUE(TuningAppliesTo(predicted, "NVIDIA H200"));
  EXPECT_TRUE(TuningAppliesTo(predicted, "NVIDIA H200 NVL"));
  EXPECT_FALSE(TuningAppliesTo(predicted, "NVIDIA H100 80GB HBM3"));
  predicted.device = "A100-80GB";
  EXPECT_TRUE(TuningAppliesTo(predicted, "NVIDIA A100-SXM4-80GB"));
  EXPECT_FALSE(TuningAppliesTo(predicted, "NVIDIA H200"));
  predicted.device = "";
  EXPECT_FALSE(TuningAppliesTo(predicted, "NVIDIA H200"));
}

TEST(GemmTuning, ErrorsNameTheFileAndField) {
  auto error = [](const std::string& text) {
    auto t = ParseGemmTuning(text, "a/tune.json");
    EXPECT_FALSE(t.ok()) << text;
    return t.ok() ? std::string() : std::string(t.status().message());
  };
  EXPECT_EQ(error("{"), "a/tune.json: (file): is not valid JSON");
  EXPECT_EQ(error("[]"), "a/tune.json: (file): must be an object");
  EXPECT_EQ(error(R"({"cublaslt": "1", "kernels": {}})"), "a/tune.json: device: must be a string");
  EXPECT_EQ(error(R"({"device": "d", "cublaslt": "1", "kernels": []})"),
            "a/tune.json: kernels: must be an object");
  EXPECT_EQ(error(R"({"device": "d", "cublaslt": "1", "kernels": {"k": [{"max_rows": 0, "impl": "llmc"}]}})"),
            "a/tune.json: kernels.k[0].max_rows: must be a positive integer");
  EXPECT_EQ(error(R"({"device": "d", "cublaslt": "1", "kernels": {"k": [{"max_rows": 1, "impl": "cublas"}]}})"),
            "a/tune.json: kernels.k[0].impl: must be \"llmc\" or \"cublaslt\"");
  EXPECT_EQ(error(R"({"device": "d", "cublaslt": "1", "kernels": {"k": [{"max_rows": 8, "impl": "llmc"}, {"max_rows": 8, "impl": "llmc"}]}})"),
            "a/tune.json: kernels.k[1].max_rows: must ascend");
  EXPECT_EQ(error(R"({"source": "guessed", "device": "d", "cublaslt": "", "kernels": {}})"),
            "a/tune.json: source: must be \"measured\" or \"predicted\"");
}

}  // namespace
}  // namespace llmc
