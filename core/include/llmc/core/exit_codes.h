// Process exit codes shared by every llmc executable (llmc, llmc-rt, and the
// compiler's `llmc compile`), so scripts can tell bad usage from a failed run
// whichever binary they called.
#ifndef LLMC_CORE_EXIT_CODES_H_
#define LLMC_CORE_EXIT_CODES_H_

namespace llmc {

// The command ran and failed (bad input, I/O, a kernel error): the message
// says why.
inline constexpr int kExitFailure = 1;
// Bad usage: an unknown flag, a missing or malformed argument.
inline constexpr int kExitUsage = 2;
// A subcommand that exists in the interface but is not built yet.
inline constexpr int kExitNotImplemented = 3;

}  // namespace llmc

#endif  // LLMC_CORE_EXIT_CODES_H_
