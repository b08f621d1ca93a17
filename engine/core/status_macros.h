// DLLM_RETURN_IF_ERROR: returns the status of `expr` from the enclosing function when it is
// not OK. The one copy of this macro for the engine and the server (Debian's abseil has no
// public equivalent). The local is not const so that the return moves it.
#ifndef DLLM_ENGINE_CORE_STATUS_MACROS_H_
#define DLLM_ENGINE_CORE_STATUS_MACROS_H_

#include <utility>

#include "absl/status/status.h"

#define DLLM_RETURN_IF_ERROR(expr)                     \
  do {                                                 \
    absl::Status dllm_return_if_error_status = (expr); \
    if (!dllm_return_if_error_status.ok()) {           \
      return dllm_return_if_error_status;              \
    }                                                  \
  } while (0)

// DLLM_ASSIGN_OR_RETURN(var, expr): declares `var` from the value of the StatusOr `expr`, or
// returns its status from the enclosing function.
// `var` names a declaration, so it cannot be parenthesized.
// NOLINTBEGIN(bugprone-macro-parentheses)
#define DLLM_ASSIGN_OR_RETURN(var, expr)                   \
  auto var##_or = (expr);                                  \
  if (!var##_or.ok()) return std::move(var##_or).status(); \
  auto var = std::move(*var##_or)
// NOLINTEND(bugprone-macro-parentheses)

#endif  // DLLM_ENGINE_CORE_STATUS_MACROS_H_
