//===- CompileCommand.h - `llmc compile` ------------------------*- C++ -*-===//
#ifndef LLMC_COMPILER_DRIVER_COMPILECOMMAND_H
#define LLMC_COMPILER_DRIVER_COMPILECOMMAND_H

namespace llmc {

// Entry point of `llmc compile`; argv[0] is "llmc compile".
int runCompileCommand(int argc, char **argv);

} // namespace llmc

#endif // LLMC_COMPILER_DRIVER_COMPILECOMMAND_H
