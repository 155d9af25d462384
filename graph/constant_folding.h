// Evaluates the small integer and scalar computations that ONNX exporters
// emit to compute shapes at run time (Shape -> Gather -> Unsqueeze -> Concat
// -> Reshape, Range, ConstantOfShape, ...), so that the importer can turn
// them into constants and let shape inference resolve what they feed.
//
// Contract: FoldNode evaluates one node when every input it needs is a known
// constant (or, for Shape and Size, has a fully known shape) and the result
// is small (at most kMaxFoldedElements elements). It returns std::nullopt
// when it cannot or will not evaluate the node; it never guesses.
#ifndef PLACER_GRAPH_CONSTANT_FOLDING_H_
#define PLACER_GRAPH_CONSTANT_FOLDING_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "graph/graph.h"

namespace placer {

inline constexpr int64_t kMaxFoldedElements = 1 << 16;

// A small dense constant. Integral and bool values live in `ints`, floating
// point ones in `reals`; exactly one of the two is filled.
struct FoldedValue {
  DataType dtype = DataType::kUndefined;
  std::vector<int64_t> dims;
  std::vector<int64_t> ints;
  std::vector<double> reals;

  bool is_integral() const { return !IsFloatingPoint(dtype); }
  int64_t size() const;
  // Little-endian raw bytes in `dtype`, as TensorData stores them.
  TensorData ToTensorData() const;
};

// One input of a node being folded: its constant value when known, else its
// shape when known.
struct FoldInput {
  const FoldedValue* value = nullptr;      // null when not constant
  const std::vector<int64_t>* shape = nullptr;  // null when unknown
  DataType dtype = DataType::kUndefined;
};

// Evaluates `op` (its attributes and type only are read). Returns one value
// per output, or nullopt when the node is not foldable.
std::optional<std::vector<FoldedValue>> FoldNode(
    const Op& op, const std::vector<FoldInput>& inputs);

}  // namespace placer

#endif  // PLACER_GRAPH_CONSTANT_FOLDING_H_
