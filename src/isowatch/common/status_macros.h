// SPDX-License-Identifier: Apache-2.0
#pragma once

#include "absl/status/status.h"
#include "absl/status/statusor.h"

// The abseil shipped by Debian 12 (LTS 20220623) has no ABSL_RETURN_IF_ERROR; these two macros
// stand in for it until the project pins an abseil that has them.

#define ISOWATCH_CONCAT_INNER(a, b) a##b
#define ISOWATCH_CONCAT(a, b) ISOWATCH_CONCAT_INNER(a, b)

// Evaluates `expr` (an absl::Status) and returns it from the enclosing function if it is not OK.
#define RETURN_IF_ERROR(expr)                             \
  do {                                                    \
    if (::absl::Status _status = (expr); !_status.ok()) { \
      return _status;                                     \
    }                                                     \
  } while (false)

// ASSIGN_OR_RETURN(lhs, expr): evaluates `expr` (an absl::StatusOr<T>); on error returns its
// status, otherwise moves the value into `lhs` (which may be a declaration: `auto x`).
#define ASSIGN_OR_RETURN(lhs, expr) \
  ISOWATCH_ASSIGN_OR_RETURN_IMPL(ISOWATCH_CONCAT(_statusor_, __LINE__), lhs, expr)
// `statusor` is the name of the variable to declare and `lhs` may be a declaration (`auto x`):
// neither can be put in parentheses.
// NOLINTBEGIN(bugprone-macro-parentheses)
#define ISOWATCH_ASSIGN_OR_RETURN_IMPL(statusor, lhs, expr) \
  auto statusor = (expr);                                   \
  if (!statusor.ok()) {                                     \
    return std::move(statusor).status();                    \
  }                                                         \
  lhs = *std::move(statusor)
// NOLINTEND(bugprone-macro-parentheses)
