// RETURN_IF_ERROR / ASSIGN_OR_RETURN for absl::Status (absl 20220623 has
// none). Thread-safe: they are expressions over their arguments only.
#pragma once

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define LOGFS_CONCAT_INNER(a, b) a##b
#define LOGFS_CONCAT(a, b) LOGFS_CONCAT_INNER(a, b)

// Evaluates `expr` (an absl::Status) and returns it from the caller if not OK.
#define RETURN_IF_ERROR(expr)                         \
  do {                                                \
    ::absl::Status logfs_status_ = (expr);            \
    if (!logfs_status_.ok()) return logfs_status_;    \
  } while (0)

// ASSIGN_OR_RETURN(lhs, expr): evaluates `expr` (an absl::StatusOr<T>);
// on error returns its status from the caller, else moves the value to lhs.
#define ASSIGN_OR_RETURN(lhs, expr) \
  LOGFS_ASSIGN_OR_RETURN_IMPL(LOGFS_CONCAT(logfs_statusor_, __LINE__), lhs, expr)

#define LOGFS_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                \
  if (!tmp.ok()) return tmp.status();               \
  lhs = std::move(tmp).value()
