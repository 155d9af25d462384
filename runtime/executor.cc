// CheckRunnable (runtime/executor.h): the ops no kernel runs, listed.
#include "runtime/executor.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/executor_ops.h"

namespace placer {

absl::Status CheckRunnable(const Graph& graph) {
  std::vector<std::string> missing;
  for (int i : OpsUnsupportedByExecutor(graph)) {
    const Op& op = graph.op(i);
    missing.push_back(absl::StrCat("'", op.key, "' (",
                                   op.domain.empty() ? "" : op.domain + ":",
                                   op.op_type, ")"));
  }
  if (missing.empty()) return absl::OkStatus();
  return absl::UnimplementedError(absl::StrCat(
      "no LibTorch kernel for ", missing.size(), " op(s): ",
      absl::StrJoin(missing.begin(),
                    missing.begin() + std::min<size_t>(missing.size(), 20), ", "),
      missing.size() > 20 ? ", ..." : ""));
}

}  // namespace placer
