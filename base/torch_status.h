// Exceptions as statuses: LibTorch (and the allocator) report failures by
// throwing; placer's interfaces return absl::Status. Every entry point that
// runs LibTorch catches there with these, so no exception escapes a Status
// interface and none reaches a std::thread (which would std::terminate).
//
// Contract: TorchErrorStatus maps out of memory (c10::OutOfMemoryError, CUDA
// or host, and std::bad_alloc) to ResourceExhausted and anything else to
// InvalidArgument, with LibTorch's message without its C++ backtrace,
// `context` prefixed. CatchExceptions(context, f) returns f()'s status, or
// the caught exception's.
#ifndef PLACER_BASE_TORCH_STATUS_H_
#define PLACER_BASE_TORCH_STATUS_H_

#include <exception>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace placer {

absl::Status TorchErrorStatus(const std::exception& e,
                              absl::string_view context);

template <typename F>
auto CatchExceptions(absl::string_view context, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const std::exception& e) {
    return TorchErrorStatus(e, context);
  }
}

}  // namespace placer

#endif  // PLACER_BASE_TORCH_STATUS_H_
