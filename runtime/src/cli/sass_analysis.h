// What the SASS of a kernel says about its cost: the text `cuobjdump -sass`
// (or nvdisasm) prints, read into instructions per function, its loops (from
// backward branches), and instruction mixes and memory access widths per
// loop. `llmc inspect --kernels` multiplies the hot loop's instruction count
// by the trips the emitter's cost model gives, so the loop found here must be
// the one the emitter means: the innermost loop with the most instructions.
//
// Pure text processing: no CUDA, no tools; internal to cli/.
#ifndef LLMC_RUNTIME_CLI_SASS_ANALYSIS_H_
#define LLMC_RUNTIME_CLI_SASS_ANALYSIS_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace llmc::cli {

struct SassInstruction {
  int64_t address = 0;
  std::string predicate;  // "@!P0", or ""
  std::string opcode;     // the whole mnemonic: "LDG.E.128.CONSTANT"
  std::string operands;   // the rest, without the closing ';'
  int64_t target = -1;    // a branch's target address; -1 when none or unknown
};

// The opcode class: the mnemonic before its first '.' ("LDG" of
// "LDG.E.128.CONSTANT", "HFMA2" of "HFMA2.MMA").
absl::string_view OpcodeClass(absl::string_view opcode);
// Bytes one thread moves with a memory instruction, from the opcode's
// modifiers: .256 32, .128 16, .64 8, .U16/.S16 2, .U8/.S8 1, else 4.
int AccessBytes(absl::string_view opcode);

// Counts of a range of instructions.
struct InstructionMix {
  int64_t instructions = 0;
  std::map<std::string, int64_t> by_class;  // "FFMA" -> 12
  // Bytes per thread per access -> accesses. Global loads: LDG and LDGSTS
  // (cp.async reads global memory too); global stores: STG; shared: LDS/STS.
  std::map<int, int64_t> global_loads, global_stores, shared_loads, shared_stores;
  int64_t global_load_bytes = 0;   // per thread, summed over the accesses
  int64_t global_store_bytes = 0;

  void Add(const SassInstruction& inst);
};

// A loop: the instructions from a backward branch's target to the branch
// (with several back edges to one target, to the last of them). An
// unconditional branch from past the last EXIT back before it (an
// out-of-line path returning into its loop) is not a back edge.
struct SassLoop {
  int64_t start = 0, end = 0;  // addresses of the first and the last instruction
  int depth = 1;               // 1: outermost
  bool innermost = true;       // contains no other loop
  InstructionMix mix;
};

struct SassFunction {
  std::string name;
  std::vector<SassInstruction> instructions;  // without the padding
  // The padding after the code: the `BRA self` trap after the last EXIT and
  // the NOPs after it (never executed; not in `instructions` or `mix`).
  int64_t padding = 0;
  InstructionMix mix;            // the whole function
  std::vector<SassLoop> loops;   // by start address
  int hot_loop = -1;             // into loops: the innermost with the most instructions; -1: none
  // The innermost loop with the most instructions after hot_loop; -1: none.
  // A kernel that peels iterations into a copy of its main loop
  // (ManifestCudaCost::peeled_trips) has the two here and in hot_loop.
  int next_loop = -1;
  int64_t outside_loops = 0;     // instructions in no loop

  const SassLoop* hot() const { return hot_loop < 0 ? nullptr : &loops[size_t(hot_loop)]; }
  const SassLoop* next() const { return next_loop < 0 ? nullptr : &loops[size_t(next_loop)]; }
};

// Every function of the text, in its order. InvalidArgument when the text
// holds no function with an instruction (empty, garbage); a truncated text
// gives what it has.
absl::StatusOr<std::vector<SassFunction>> ParseSass(absl::string_view text);

// The function named `name`, or nullptr.
const SassFunction* FindSassFunction(const std::vector<SassFunction>& functions,
                                     absl::string_view name);

// "16Bx2 4Bx1": a width histogram, widest first; "-" when empty.
std::string FormatWidths(const std::map<int, int64_t>& widths);
// "FFMA 12, LDG 2, IMAD 3, ...": the `top` most frequent classes (ties by
// name), then "+N more" for the rest.
std::string FormatMix(const InstructionMix& mix, size_t top = 6);

}  // namespace llmc::cli

#endif  // LLMC_RUNTIME_CLI_SASS_ANALYSIS_H_
