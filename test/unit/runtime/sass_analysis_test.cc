// The SASS reader of `llmc inspect --kernels` on real disassembly:
// Inputs/sass_loops.cu compiled and dumped with
//   nvcc -arch=sm_90 -cubin -O3 -o loops.cubin sass_loops.cu
//   cuobjdump -sass loops.cubin > sass_loops.cuobjdump.txt
//   nvdisasm -c loops.cubin > sass_loops.nvdisasm.txt
// (CUDA 13.0 nvcc, cuobjdump/nvdisasm 13.5). The counts below were read off
// the dumps by hand; both formats must give the same.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "cli/sass_analysis.h"

namespace llmc::cli {
namespace {

std::string ReadInput(const std::string& name) {
  std::ifstream in(std::string(LLMC_RUNTIME_TEST_INPUTS) + "/" + name);
  EXPECT_TRUE(in.good()) << name;
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Instructions of class `cls` in `mix` (0 when none: no throwing at()).
int64_t Count(const InstructionMix& mix, const std::string& cls) {
  auto it = mix.by_class.find(cls);
  return it == mix.by_class.end() ? 0 : it->second;
}

void CheckLoopsFixture(const std::vector<SassFunction>& fs) {
  ASSERT_EQ(fs.size(), 2u);

  // sum_bytes: an outer loop over rows around an inner one over columns
  // (1-byte loads), then a 2-byte store.
  const SassFunction* sum = FindSassFunction(fs, "sum_bytes");
  ASSERT_NE(sum, nullptr);
  EXPECT_EQ(sum->mix.instructions, 35);  // 0x000..0x220
  EXPECT_EQ(sum->padding, 13);           // BRA 0x230 and 12 NOPs
  ASSERT_EQ(sum->loops.size(), 2u);
  const SassLoop& outer = sum->loops[0];
  EXPECT_EQ(outer.start, 0x90);
  EXPECT_EQ(outer.end, 0x1d0);
  EXPECT_EQ(outer.mix.instructions, 21);
  EXPECT_EQ(outer.depth, 1);
  EXPECT_FALSE(outer.innermost);
  const SassLoop& inner = sum->loops[1];
  EXPECT_EQ(inner.start, 0x130);
  EXPECT_EQ(inner.end, 0x190);
  EXPECT_EQ(inner.mix.instructions, 7);
  EXPECT_EQ(inner.depth, 2);
  EXPECT_TRUE(inner.innermost);
  EXPECT_EQ(sum->hot_loop, 1);
  EXPECT_EQ(Count(inner.mix, "LDG"), 1);
  EXPECT_EQ(Count(inner.mix, "IADD3"), 3);  // IADD3 x2, IADD3.X
  EXPECT_EQ(Count(inner.mix, "IMAD"), 1);
  EXPECT_EQ(Count(inner.mix, "ISETP"), 1);
  EXPECT_EQ(Count(inner.mix, "BRA"), 1);
  EXPECT_EQ(inner.mix.global_loads, (std::map<int, int64_t>{{1, 1}}));
  EXPECT_EQ(inner.mix.global_load_bytes, 1);
  EXPECT_EQ(sum->outside_loops, 35 - 21);
  EXPECT_EQ(Count(sum->mix, "BRA"), 4);  // the trap is padding
  EXPECT_EQ(sum->mix.global_stores, (std::map<int, int64_t>{{2, 1}}));

  // dot4: one loop with two 16-byte loads, a 4-byte store after it.
  const SassFunction* dot = FindSassFunction(fs, "dot4");
  ASSERT_NE(dot, nullptr);
  EXPECT_EQ(dot->mix.instructions, 29);  // 0x000..0x1c0
  EXPECT_EQ(dot->padding, 11);
  ASSERT_EQ(dot->loops.size(), 1u);
  const SassLoop* hot = dot->hot();
  ASSERT_NE(hot, nullptr);
  EXPECT_EQ(hot->start, 0xe0);
  EXPECT_EQ(hot->end, 0x190);
  EXPECT_EQ(hot->mix.instructions, 12);
  EXPECT_EQ(Count(hot->mix, "FFMA"), 3);
  EXPECT_EQ(Count(hot->mix, "FMUL"), 1);
  EXPECT_EQ(Count(hot->mix, "IMAD"), 2);  // IMAD.WIDE x2
  EXPECT_EQ(hot->mix.global_loads, (std::map<int, int64_t>{{16, 2}}));
  EXPECT_EQ(hot->mix.global_load_bytes, 32);
  EXPECT_EQ(dot->outside_loops, 17);
  EXPECT_EQ(Count(dot->mix, "HFMA2"), 1);  // HFMA2.MMA
  EXPECT_EQ(dot->mix.global_stores, (std::map<int, int64_t>{{4, 1}}));
  EXPECT_EQ(FormatWidths(hot->mix.global_loads), "16Bx2");
  EXPECT_EQ(FormatMix(hot->mix, 2), "FFMA 3, IMAD 2, +7 more");
}

TEST(SassAnalysis, CuobjdumpFixture) {
  auto fs = ParseSass(ReadInput("sass_loops.cuobjdump.txt"));
  ASSERT_TRUE(fs.ok()) << fs.status();
  CheckLoopsFixture(*fs);
  // The instruction itself, predicate and operands split off.
  const SassInstruction& i = FindSassFunction(*fs, "sum_bytes")->instructions[4];
  EXPECT_EQ(i.address, 0x40);
  EXPECT_EQ(i.predicate, "@!P0");
  EXPECT_EQ(i.opcode, "IMAD.MOV.U32");
  EXPECT_EQ(i.operands, "R5, RZ, RZ, RZ");
}

TEST(SassAnalysis, NvdisasmFixtureWithLabels) {
  auto fs = ParseSass(ReadInput("sass_loops.nvdisasm.txt"));
  ASSERT_TRUE(fs.ok()) << fs.status();
  CheckLoopsFixture(*fs);
}

TEST(SassAnalysis, AccessWidths) {
  EXPECT_EQ(AccessBytes("LDG.E.128.CONSTANT"), 16);
  EXPECT_EQ(AccessBytes("LDG.E.64"), 8);
  EXPECT_EQ(AccessBytes("LDG.E"), 4);
  EXPECT_EQ(AccessBytes("LDG.E.U16"), 2);
  EXPECT_EQ(AccessBytes("STG.E.S8"), 1);
  EXPECT_EQ(AccessBytes("LDS.128"), 16);
  EXPECT_EQ(OpcodeClass("HFMA2.MMA"), "HFMA2");
  EXPECT_EQ(OpcodeClass("EXIT"), "EXIT");
}

// Two back edges to one target are one loop, to the last of them; a loop
// of 8 inside a loop of 3 + 8: the inner one is hot whatever its size rank.
TEST(SassAnalysis, BackEdgesAndNesting) {
  const char* text = R"(
    Function : k
        /*0000*/                   MOV R0, RZ ;
        /*0010*/                   LDS.64 R2, [R0] ;
        /*0020*/               @P0 BRA 0x10 ;
        /*0030*/                   STS.U8 [R0], R2 ;
        /*0040*/               @P1 BRA 0x10 ;
        /*0050*/                   EXIT ;
  )";
  auto fs = ParseSass(text);
  ASSERT_TRUE(fs.ok()) << fs.status();
  const SassFunction& f = (*fs)[0];
  ASSERT_EQ(f.loops.size(), 1u);
  EXPECT_EQ(f.loops[0].start, 0x10);
  EXPECT_EQ(f.loops[0].end, 0x40);
  EXPECT_EQ(f.loops[0].mix.instructions, 4);
  EXPECT_EQ(f.loops[0].mix.shared_loads, (std::map<int, int64_t>{{8, 1}}));
  EXPECT_EQ(f.loops[0].mix.shared_stores, (std::map<int, int64_t>{{1, 1}}));
  EXPECT_EQ(f.outside_loops, 2);
  EXPECT_EQ(f.padding, 0);
}

// ptxas lays a shuffle's divergent fallback (BRA.DIV) out past the EXIT and
// jumps back into the loop from there: that unconditional back edge is no
// loop (it would have made 0x40..0xa0, 7 instructions, the hot loop). The
// second loop is next_loop, the one a peeled kernel's trips count.
TEST(SassAnalysis, OutOfLineReturnIsNoLoop) {
  const char* text = R"(
    Function : k
        /*0000*/                   MOV R0, RZ ;
        /*0010*/                   LDS R1, [R0] ;
        /*0020*/                   BRA.DIV UR5, 0x90 ;
        /*0030*/                   SHFL.BFLY PT, R2, R1, 0x1, 0x1f ;
        /*0040*/                   FADD R3, R2, R1 ;
        /*0050*/               @P0 BRA 0x10 ;
        /*0060*/                   LDS R4, [R0] ;
        /*0070*/               @P1 BRA 0x60 ;
        /*0080*/                   EXIT ;
        /*0090*/                   WARPSYNC.ALL ;
        /*00a0*/                   BRA 0x40 ;
  )";
  auto fs = ParseSass(text);
  ASSERT_TRUE(fs.ok()) << fs.status();
  const SassFunction& f = (*fs)[0];
  ASSERT_EQ(f.loops.size(), 2u);
  ASSERT_NE(f.hot(), nullptr);
  EXPECT_EQ(f.hot()->start, 0x10);
  EXPECT_EQ(f.hot()->end, 0x50);
  ASSERT_NE(f.next(), nullptr);
  EXPECT_EQ(f.next()->start, 0x60);
  EXPECT_EQ(f.next()->mix.instructions, 2);
  EXPECT_EQ(f.outside_loops, 4);  // MOV, EXIT and the fallback's two
}

TEST(SassAnalysis, MalformedInput) {
  EXPECT_FALSE(ParseSass("").ok());
  EXPECT_FALSE(ParseSass("garbage\n\x01\x02 /* */ ;;; @@ Function\n/*zz*/ FOO").ok());
  EXPECT_FALSE(ParseSass("Function : empty\n  .headerflags @\"x\"\n").ok());
  // Instructions before any header belong to no function.
  EXPECT_FALSE(ParseSass("/*0000*/ EXIT ;\n").ok());
  // Odd lines inside a function are skipped, never fatal.
  auto odd = ParseSass("Function : f\n/*0010*/ @P0\n/*0020*/ ;\n/*0030*/ BRA\n/*0040*/ BRA 0xzz ;\n"
                       "/**/ X\n/*00000000000000000*/ EXIT ;\n/*0050*/ BRA 0x0 ;\n");
  ASSERT_TRUE(odd.ok()) << odd.status();
  EXPECT_EQ((*odd)[0].mix.instructions, 3);  // BRA, BRA 0xzz, BRA 0x0
  ASSERT_EQ((*odd)[0].loops.size(), 1u);     // 0x0 has no instruction: the loop starts there
  EXPECT_EQ((*odd)[0].loops[0].mix.instructions, 3);

  // Every prefix of the real dump parses or fails cleanly; a cut inside the
  // hot loop still finds the loops whose back edge it kept.
  std::string text = ReadInput("sass_loops.cuobjdump.txt");
  for (size_t n = 0; n < text.size(); n += 97) (void)ParseSass(text.substr(0, n));
  size_t cut = text.find("/*0160*/");
  ASSERT_NE(cut, std::string::npos);
  auto truncated = ParseSass(text.substr(0, cut + 40));  // "... IADD3 R2, P1, R"
  ASSERT_TRUE(truncated.ok());
  ASSERT_EQ(truncated->size(), 1u);
  EXPECT_EQ((*truncated)[0].name, "sum_bytes");
  EXPECT_TRUE((*truncated)[0].loops.empty());  // the back edge at 0x190 was cut off
  EXPECT_EQ((*truncated)[0].mix.instructions, 23);
}

}  // namespace
}  // namespace llmc::cli
