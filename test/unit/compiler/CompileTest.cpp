//===- CompileTest.cpp - llmc compile as a library call -------------------===//
#include "Driver/Compile.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

namespace llmc {
namespace {

CompileOptions tinyLlama(EmitKind emit) {
  CompileOptions o;
  o.builtin = "tiny-llama";
  o.emit = emit;
  o.output = "-";
  return o;
}

// The message of checkCompileOptions' usage error ("" when the options are
// accepted).
std::string problem(const CompileOptions &o) {
  absl::Status st = checkCompileOptions(o);
  if (st.ok())
    return "";
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  return std::string(st.message());
}

TEST(CompileOptions, ValidOptionsPass) {
  EXPECT_EQ(problem(tinyLlama(EmitKind::kMLIR)), "");
  CompileOptions o = tinyLlama(EmitKind::kKernels);
  o.quantize = "w4a16";
  o.quantizeGroup = 64;
  o.quantizeSkip = std::vector<std::string>{"lm_head"};
  o.printIrAfter = {"llmc-fuse"};
  EXPECT_EQ(problem(o), "");
}

TEST(CompileOptions, ModelErrorsNameWhatIsMissing) {
  CompileOptions o;
  o.emit = EmitKind::kMLIR;
  EXPECT_EQ(problem(o), "no model given (MODEL or --builtin=NAME; see --help)");
  o.model = "m.gguf";
  o.builtin = "tiny-llama";
  EXPECT_EQ(problem(o), "give either MODEL or --builtin, not both");
  o.model.clear();
  o.builtin = "nope";
  EXPECT_EQ(problem(o), "unknown built-in model 'nope' (see --list-builtins)");
}

TEST(CompileOptions, QuantizeErrorsComeFromThePassAndNameTheFlag) {
  CompileOptions o = tinyLlama(EmitKind::kKernels);
  o.quantize = "int4";
  EXPECT_EQ(problem(o), "--quantize must be none, w8a16 or w4a16, got 'int4'");
  o.quantize = "w8a16";
  o.quantizeGroup = 100;
  EXPECT_EQ(problem(o), "--quantize-group must be 32, 64 or 128, got 100");
  o.quantizeGroup = 32;
  o.quantizeSkip = std::vector<std::string>{"lm_head", "", "x"};
  EXPECT_EQ(problem(o), "--quantize-skip has an empty entry in 'lm_head,,x'");
  o = tinyLlama(EmitKind::kKernels);
  o.quantizeGroup = 64;
  EXPECT_EQ(problem(o), "--quantize-group and --quantize-skip need --quantize=w8a16 or w4a16");
}

TEST(CompileOptions, DummyFormatsComeFromTheFormatTable) {
  CompileOptions o = tinyLlama(EmitKind::kArtifact);
  o.output = "/tmp/never-written.llmc";
  o.dummyWeights = "iq2_xxs";
  // Every block format of the table, but not the group-wise ints.
  EXPECT_EQ(problem(o), "--dummy-weights must be f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, "
                        "q2_k, q3_k, q4_k, q5_k or q6_k, got 'iq2_xxs'");
  o.dummyWeights = "i4";
  EXPECT_NE(problem(o), "");
  o.dummyWeights = "q4_k";
  EXPECT_EQ(problem(o), "");
  o.builtin.clear();
  o.model = "model.gguf";
  EXPECT_EQ(problem(o),
            "--dummy-weights needs --builtin=NAME (a model file has its own weights)");
}

TEST(CompileOptions, TargetsAndEmitKinds) {
  CompileOptions o = tinyLlama(EmitKind::kCUDA);
  EXPECT_EQ(problem(o), "--emit=cuda and --emit=ptx need a CUDA target (--target=sm_80, sm_90, ...)");
  o.targets = {"host", "sm_70"};
  EXPECT_EQ(problem(o), "unknown target 'host,sm_70' (expected host, sm_XX with XX >= 80, or "
                        "sm_90a, e.g. --target=host,sm_80,sm_90)");
  o.targets = {"sm_80a"};  // arch-specific PTX: sm_90a only
  EXPECT_EQ(problem(o), "unknown target 'sm_80a' (expected host, sm_XX with XX >= 80, or "
                        "sm_90a, e.g. --target=host,sm_80,sm_90)");
  o.targets = {"sm_90"};
  o.dtype = "f8";
  EXPECT_EQ(problem(o), "--dtype must be f32, f16 or bf16, got 'f8'");
  o = tinyLlama(EmitKind::kArtifact);
  EXPECT_EQ(problem(o), "built-in models have no weights; compile a model file (tools/synth-model "
                        "writes synthetic ones), use --dummy-weights=FORMAT or --emit=mlir");
  o.dummyWeights = "f16";
  EXPECT_EQ(problem(o), "an artifact needs -o DIR");
}

TEST(CompileOptions, PrintIrAfterNamesAPassOfThisPipeline) {
  CompileOptions o = tinyLlama(EmitKind::kMLIR);
  // --emit=mlir stops before fusion, so llmc-fuse is not in its pipeline.
  o.printIrAfter = {"llmc-fuse"};
  std::string p = problem(o);
  EXPECT_NE(p.find("--print-ir-after: no pass 'llmc-fuse' in this pipeline (it runs: "),
            std::string::npos)
      << p;
  o.emit = EmitKind::kKernels;
  EXPECT_EQ(problem(o), "");
}

TEST(Compile, EmitsTheImportedIR) {
  absl::StatusOr<CompileResult> r = compile(tinyLlama(EmitKind::kMLIR));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_NE(r->text.find("func.func @step"), std::string::npos);
  EXPECT_NE(r->text.find("llm.paged_attention"), std::string::npos);
  EXPECT_EQ(r->text.find("llm.fusion"), std::string::npos) << "fusion runs after --emit=mlir";
}

TEST(Compile, EmitsFusionGroupsAndTheirBuffers) {
  absl::StatusOr<CompileResult> r = compile(tinyLlama(EmitKind::kKernels));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_NE(r->text.find("llm.fusion"), std::string::npos);
  CompileOptions unfused = tinyLlama(EmitKind::kKernels);
  unfused.fuse = false;
  absl::StatusOr<CompileResult> u = compile(unfused);
  ASSERT_TRUE(u.ok()) << u.status();
  EXPECT_NE(u->text, r->text);
}

TEST(Compile, EmitsCudaSourceWithoutAToolkit) {
  CompileOptions o = tinyLlama(EmitKind::kCUDA);
  o.targets = {"sm_90"};
  absl::StatusOr<CompileResult> r = compile(o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_NE(r->text.find("extern \"C\" __global__"), std::string::npos);
  EXPECT_NE(r->text.find("#include \"llmc_cuda_kernels.cuh\""), std::string::npos);
}

TEST(Compile, UsageErrorsComeBackBeforeAnythingIsRead) {
  CompileOptions o = tinyLlama(EmitKind::kKernels);
  o.quantize = "int4";
  absl::StatusOr<CompileResult> r = compile(o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(Compile, AMissingModelFileIsAnErrorThatNamesIt) {
  CompileOptions o;
  o.model = "/nonexistent/llmc-test-model.gguf";
  o.emit = EmitKind::kMLIR;
  o.output = "-";
  ASSERT_TRUE(checkCompileOptions(o).ok());
  absl::StatusOr<CompileResult> r = compile(o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(std::string(r.status().message()).find("llmc-test-model.gguf"), std::string::npos)
      << r.status();
}

} // namespace
} // namespace llmc
