//===- Partition.h - helpers shared by the partition passes -----*- C++ -*-===//
#ifndef LLMC_PASSES_PARTITION_PARTITION_H
#define LLMC_PASSES_PARTITION_PARTITION_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/StringRef.h"

namespace llmc {

// The module attribute that records how the module was partitioned:
//   llm.mesh = {tp = 2 : i64, pp = 2 : i64, stage = 1 : i64}
// (absent keys: not partitioned that way). Codegen and the artifact read it.
inline constexpr llvm::StringLiteral kMeshAttr = "llm.mesh";

// The @step that `pass` (its argument, for messages) partitions along `key`;
// fails with a diagnostic when there is none, or when llm.mesh already has
// `key` (a module is partitioned each way once).
mlir::FailureOr<mlir::func::FuncOp> stepToPartition(mlir::ModuleOp module, llvm::StringRef pass,
                                                    llvm::StringRef key);

// Sets `key` = `value` in llm.mesh, keeping its other entries.
void setMeshAttr(mlir::ModuleOp module, llvm::StringRef key, int64_t value);

// Makes the weight read through `use` one rank's slice: `pieces` equal
// slices along `dim`, rank r of `ranks` holding slice r * pieces / ranks
// (#llm.shard). The llm.weight op is cloned first when something else reads
// it too (a tied embedding stays whole for llm.embed); the copy is named
// `cloneName` (`concat [<stored name>]`: weights are packed by name, and the
// slice is not the stored tensor). `pad`: the last slice
// may come up short (zero padding); otherwise `pieces` must divide the
// dimension. A slice of the innermost dimension must hold whole quantization
// blocks. Errors name the weight and say why.
mlir::LogicalResult shardWeight(mlir::OpOperand &use, int64_t dim, int64_t pieces, int64_t ranks,
                                bool pad, llvm::StringRef cloneName = "");

// Makes the stacked experts read through `use` (an llm.moe's gate, up or
// down: `experts` matrices one after the other) one rank's slice of every
// expert: each expert's rows (dim 0) or columns (dim 1) split in `ranks`
// equal pieces, as a dense MLP's. A stack stored as one tensor (a GGUF's
// ffn_*_exps) becomes a concat of its experts' row slices first, since the
// shard applies part by part.
mlir::LogicalResult shardExperts(mlir::OpOperand &use, int64_t experts, int64_t dim,
                                 int64_t ranks);

} // namespace llmc

#endif // LLMC_PASSES_PARTITION_PARTITION_H
