// Output shapes that ONNX's shape inference (1.12) leaves symbolic although
// the op's inputs fix them: Einsum (it infers the rank only) and Expand
// whose target shape is a constant the importer folded. The importer feeds
// these back to ONNX's inference, so what reads them resolves too.
//
// Contract: InferOutputShapes returns one shape per output of `op` when it
// has a rule for the op and every input it needs is known (a shape, or a
// constant where the value matters), nullopt otherwise; it never guesses
// and never contradicts the op's definition (inputs that do not fit the
// rule give nullopt, left for the importer to report).
#ifndef PLACER_GRAPH_SHAPE_RULES_H_
#define PLACER_GRAPH_SHAPE_RULES_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "graph/constant_folding.h"
#include "graph/graph.h"

namespace placer {

std::optional<std::vector<std::vector<int64_t>>> InferOutputShapes(
    const Op& op, const std::vector<FoldInput>& inputs);

}  // namespace placer

#endif  // PLACER_GRAPH_SHAPE_RULES_H_
