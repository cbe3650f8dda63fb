// Small helpers for absl::Status plumbing, shared by the runtime and the
// compiler. Kept tiny on purpose: Abseil 20220623 has no status macros.
#ifndef LLMC_CORE_STATUS_MACROS_H_
#define LLMC_CORE_STATUS_MACROS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define LLMC_CONCAT_INNER_(a, b) a##b
#define LLMC_CONCAT_(a, b) LLMC_CONCAT_INNER_(a, b)

// Returns from the enclosing function if `expr` (an absl::Status) is not OK.
#define LLMC_RETURN_IF_ERROR(expr)                \
  do {                                            \
    ::absl::Status llmc_status_ = (expr);         \
    if (!llmc_status_.ok()) return llmc_status_;  \
  } while (0)

// `LLMC_ASSIGN_OR_RETURN(auto x, MakeX());` unwraps a StatusOr or returns its
// error from the enclosing function.
#define LLMC_ASSIGN_OR_RETURN(lhs, expr) \
  LLMC_ASSIGN_OR_RETURN_IMPL_(LLMC_CONCAT_(llmc_statusor_, __LINE__), lhs, expr)
#define LLMC_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                \
  if (!tmp.ok()) return tmp.status();               \
  lhs = std::move(tmp).value()

#endif  // LLMC_CORE_STATUS_MACROS_H_
