#include "graph/import_options.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace placer {

absl::StatusOr<std::vector<int64_t>> ParseDims(absl::string_view text) {
  if (text.empty()) {
    return absl::InvalidArgumentError(
        "no dims: expected D0xD1x..., e.g. 32x3x224x224");
  }
  std::vector<int64_t> dims;
  for (absl::string_view d : absl::StrSplit(text, 'x')) {
    int64_t v;
    if (!absl::SimpleAtoi(d, &v) || v <= 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "dim ", dims.size(), " ('", d, "') is not a positive integer"));
    }
    dims.push_back(v);
  }
  return dims;
}

}  // namespace placer
