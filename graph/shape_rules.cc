#include "graph/shape_rules.h"

#include <algorithm>

#include "graph/einsum.h"

namespace placer {
namespace {

using Shapes = std::vector<std::vector<int64_t>>;

// The shape of input k, from its shape or its constant value.
const std::vector<int64_t>* ShapeOf(const std::vector<FoldInput>& in,
                                    size_t k) {
  if (k >= in.size()) return nullptr;
  if (in[k].shape != nullptr) return in[k].shape;
  if (in[k].value != nullptr) return &in[k].value->dims;
  return nullptr;
}

std::optional<Shapes> EinsumShapes(const Op& op,
                                   const std::vector<FoldInput>& in) {
  const AttributeValue* attribute = op.FindAttribute("equation");
  if (attribute == nullptr) return std::nullopt;
  absl::StatusOr<EinsumEquation> equation = ParseEinsum(attribute->s);
  if (!equation.ok()) return std::nullopt;
  Shapes shapes;
  for (size_t k = 0; k < in.size(); ++k) {
    const std::vector<int64_t>* s = ShapeOf(in, k);
    if (s == nullptr) return std::nullopt;
    shapes.push_back(*s);
  }
  std::optional<std::vector<int64_t>> out =
      EinsumOutputShape(*equation, shapes);
  if (!out) return std::nullopt;
  return Shapes{*out};
}

// Expand: the input's shape broadcast with the target shape (a constant).
std::optional<Shapes> ExpandShapes(const Op&,
                                   const std::vector<FoldInput>& in) {
  const std::vector<int64_t>* input = ShapeOf(in, 0);
  if (input == nullptr || in.size() < 2 || in[1].value == nullptr ||
      !in[1].value->is_integral()) {
    return std::nullopt;
  }
  const std::vector<int64_t>& target = in[1].value->ints;
  const size_t rank = std::max(input->size(), target.size());
  std::vector<int64_t> out(rank, 1);
  for (size_t i = 0; i < rank; ++i) {
    const int64_t a =
        i + input->size() >= rank ? (*input)[i + input->size() - rank] : 1;
    const int64_t b =
        i + target.size() >= rank ? target[i + target.size() - rank] : 1;
    if (a < 0 || b < 0) return std::nullopt;
    if (a != b && a != 1 && b != 1) return std::nullopt;
    out[i] = a == 1 ? b : a;
  }
  return Shapes{out};
}

}  // namespace

std::optional<std::vector<std::vector<int64_t>>> InferOutputShapes(
    const Op& op, const std::vector<FoldInput>& inputs) {
  if (!op.domain.empty()) return std::nullopt;
  if (op.op_type == "Einsum") return EinsumShapes(op, inputs);
  if (op.op_type == "Expand") return ExpandShapes(op, inputs);
  return std::nullopt;
}

}  // namespace placer
