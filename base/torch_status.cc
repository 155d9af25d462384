#include "base/torch_status.h"

#include <new>

#include <c10/util/Exception.h>

#include "absl/strings/str_cat.h"

namespace placer {

absl::Status TorchErrorStatus(const std::exception& e,
                              absl::string_view context) {
  if (const auto* oom = dynamic_cast<const c10::OutOfMemoryError*>(&e)) {
    return absl::ResourceExhaustedError(
        absl::StrCat(context, oom->what_without_backtrace()));
  }
  if (dynamic_cast<const std::bad_alloc*>(&e) != nullptr) {
    return absl::ResourceExhaustedError(
        absl::StrCat(context, "out of memory (", e.what(), ")"));
  }
  if (const auto* error = dynamic_cast<const c10::Error*>(&e)) {
    return absl::InvalidArgumentError(
        absl::StrCat(context, error->what_without_backtrace()));
  }
  return absl::InvalidArgumentError(absl::StrCat(context, e.what()));
}

}  // namespace placer
