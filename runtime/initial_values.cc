#include "runtime/initial_values.h"

#include <algorithm>
#include <cmath>

#include "runtime/torch_ops.h"

namespace placer {

bool Folded(const Tensor& t) {
  return t.data != nullptr && !t.data->raw.empty();
}

bool AllOutputsFolded(const Graph& g, const Op& op) {
  bool any = false;
  for (int out : op.outputs) {
    if (out < 0) continue;
    if (!Folded(g.tensor(out))) return false;
    any = true;
  }
  return any;
}

torch::Tensor InitParameter(const Graph& g, const Tensor& t,
                            torch::Generator& gen) {
  torch::ScalarType type = ToTorchType(t.dtype);
  if (t.shape.size() >= 2) {
    int64_t fan_in = 1;
    for (size_t k = 1; k < t.shape.size(); ++k) fan_in *= t.shape[k];
    // Gemm with transB=0 and MatMul store [in, out]: fan-in is dim 0.
    for (int c : t.consumers) {
      const Op& op = g.op(c);
      bool transposed = op.op_type == "Gemm" && op.IntAttribute("transB", 0) != 0;
      if ((op.op_type == "MatMul" || (op.op_type == "Gemm" && !transposed)) &&
          t.shape.size() == 2) {
        fan_in = t.shape[0];
      }
    }
    double bound = 1.0 / std::sqrt(static_cast<double>(std::max<int64_t>(1, fan_in)));
    return torch::rand(t.shape, gen, torch::TensorOptions().dtype(type)) *
               (2 * bound) -
           bound;
  }
  // Scales are 1: a normalization's scale input, or a vector that
  // multiplies (a decomposed LayerNorm's weight); other vectors are 0.
  for (int c : t.consumers) {
    const Op& op = g.op(c);
    bool scale = op.op_type == "Mul";
    if ((op.op_type == "BatchNormalization" ||
         op.op_type == "LayerNormalization") &&
        op.inputs.size() > 1 && g.tensor(op.inputs[1]).name == t.name) {
      scale = true;
    }
    if (scale) return torch::ones(t.shape, torch::TensorOptions().dtype(type));
  }
  return torch::zeros(t.shape, torch::TensorOptions().dtype(type));
}

torch::Tensor InitState(const Graph& g, int tensor) {
  const Tensor& t = g.tensor(tensor);
  if (!IsFloatingPoint(t.dtype) || !t.shape_known) return torch::Tensor();
  for (int c : t.consumers) {
    const Op& op = g.op(c);
    if (op.op_type != "BatchNormalization" || op.inputs.size() < 5) continue;
    auto options = torch::TensorOptions().dtype(ToTorchType(t.dtype));
    if (op.inputs[3] == tensor) return torch::zeros(t.shape, options);
    if (op.inputs[4] == tensor) return torch::ones(t.shape, options);
  }
  return torch::Tensor();
}

int64_t IndexBound(const Graph& g, int tensor) {
  int64_t bound = 0;
  for (int c : g.tensor(tensor).consumers) {
    const Op& op = g.op(c);
    int64_t b = 0;
    if (op.op_type == "Gather" && op.inputs.size() > 1 &&
        op.inputs[1] == tensor) {
      const Tensor& table = g.tensor(op.inputs[0]);
      int64_t axis = op.IntAttribute("axis", 0);
      if (axis < 0) axis += static_cast<int64_t>(table.shape.size());
      if (table.shape_known && axis >= 0 &&
          axis < static_cast<int64_t>(table.shape.size())) {
        b = table.shape[axis];
      }
    } else if (op.op_type == "SoftmaxCrossEntropyLoss" &&
               op.inputs.size() > 1 && op.inputs[1] == tensor) {
      const Tensor& scores = g.tensor(op.inputs[0]);
      if (scores.shape_known && scores.shape.size() >= 2) b = scores.shape[1];
    }
    if (b > 0) bound = bound == 0 ? b : std::min(bound, b);
  }
  return bound;
}

}  // namespace placer
