// Propagating absl::Status values: early returns that keep the error, and
// context added to a message without changing its code.
//
//   RETURN_IF_ERROR(WriteFile(path, text));
//   ASSIGN_OR_RETURN(Graph graph, ImportOnnx(path));
//   return WithContext(status, absl::StrCat(path, ": "));
//
// Both macros return the failing status itself (its code and message) from
// the enclosing function, which must return absl::Status or
// absl::StatusOr<T>. ASSIGN_OR_RETURN's left side may not hold a top-level
// comma (use an alias for such types); its expression may.
#ifndef PLACER_BASE_STATUS_HELPERS_H_
#define PLACER_BASE_STATUS_HELPERS_H_

#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace placer {

// `status` with `prefix` before its message and its code kept; OK stays OK.
inline absl::Status WithContext(const absl::Status& status,
                                absl::string_view prefix) {
  if (status.ok()) return status;
  return absl::Status(status.code(), absl::StrCat(prefix, status.message()));
}

namespace status_internal {
inline const absl::Status& AsStatus(const absl::Status& status) {
  return status;
}
template <typename T>
const absl::Status& AsStatus(const absl::StatusOr<T>& status_or) {
  return status_or.status();
}
}  // namespace status_internal

}  // namespace placer

#define PLACER_STATUS_CONCAT_INNER(a, b) a##b
#define PLACER_STATUS_CONCAT(a, b) PLACER_STATUS_CONCAT_INNER(a, b)

// Evaluates the expression (an absl::Status or absl::StatusOr) once and
// returns its status from the enclosing function when it is not OK.
#define RETURN_IF_ERROR(...)                              \
  do {                                                    \
    const ::absl::Status placer_status_ =                 \
        ::placer::status_internal::AsStatus(__VA_ARGS__); \
    if (!placer_status_.ok()) return placer_status_;      \
  } while (false)

// Evaluates the expression (an absl::StatusOr<T>); returns its status when
// not OK, else moves its value into `lhs` (a declaration or an lvalue).
#define ASSIGN_OR_RETURN(lhs, ...) \
  PLACER_ASSIGN_OR_RETURN_IMPL(    \
      PLACER_STATUS_CONCAT(placer_status_or_, __LINE__), lhs, __VA_ARGS__)
#define PLACER_ASSIGN_OR_RETURN_IMPL(status_or, lhs, ...)    \
  auto status_or = (__VA_ARGS__);                            \
  if (!status_or.ok()) return std::move(status_or).status(); \
  lhs = *std::move(status_or)

#endif  // PLACER_BASE_STATUS_HELPERS_H_
