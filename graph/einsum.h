// Einsum equations ("bhqd,bhkd->bhqk", "i,j->ij", "...ij,...jk"): parsed once
// and read by shape inference (the output's dims) and by the cost model
// (the points of the full index space).
//
// Contract: ParseEinsum accepts ONNX's grammar (letters, at most one
// "..." per term, an optional "->" output; implicit mode orders the letters
// seen once alphabetically) and returns INVALID_ARGUMENT naming what is
// wrong. The shape functions return nullopt when the shapes do not fit the
// equation (a rank, or a letter's sizes that disagree).
#ifndef PLACER_GRAPH_EINSUM_H_
#define PLACER_GRAPH_EINSUM_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace placer {

struct EinsumEquation {
  // Each term's labels, '.' standing for the ellipsis (at most once).
  std::vector<std::string> inputs;
  std::string output;
};

absl::StatusOr<EinsumEquation> ParseEinsum(absl::string_view equation);

// The output's dims for inputs of `shapes` (one per term).
std::optional<std::vector<int64_t>> EinsumOutputShape(
    const EinsumEquation& equation,
    const std::vector<std::vector<int64_t>>& shapes);

// Points of the full index space: the product of every letter's size and
// the ellipsis' broadcast dims.
std::optional<double> EinsumPoints(
    const EinsumEquation& equation,
    const std::vector<std::vector<int64_t>>& shapes);

}  // namespace placer

#endif  // PLACER_GRAPH_EINSUM_H_
