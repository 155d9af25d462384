#include "runtime/initial_values.h"

#include <algorithm>
#include <cmath>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_helpers.h"
#include "runtime/torch_ops.h"

namespace placer {

bool Folded(const Tensor& t) {
  return t.data != nullptr && !t.data->raw.empty();
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

namespace {

// Whether `op` passes the values of its input `position` on unchanged (only
// their layout, type width or count changes), so that what its outputs
// feed says what the input may hold.
bool PassesValuesOn(const Op& op, int position) {
  if (!op.domain.empty()) return false;
  static const absl::flat_hash_set<std::string> kLayout = {
      "Reshape",   "Flatten", "Squeeze", "Unsqueeze", "Identity",
      "Transpose", "Expand",  "Slice",   "Tile"};
  if (op.op_type == "Cast") {
    return !IsFloatingPoint(DataTypeFromOnnx(op.IntAttribute("to", 0))) &&
           DataTypeFromOnnx(op.IntAttribute("to", 0)) != DataType::kBool;
  }
  if (op.op_type == "Concat") return true;
  return kLayout.contains(op.op_type) && position == 0;
}

// Calls `visit(op, position)` for every use of the tensor's values, through
// the ops that pass them on.
template <typename Visit>
void ForEachValueUse(const Graph& g, int tensor, Visit visit) {
  std::vector<int> stack = {tensor};
  absl::flat_hash_set<int> seen = {tensor};
  while (!stack.empty()) {
    const int t = stack.back();
    stack.pop_back();
    for (int c : g.tensor(t).consumers) {
      const Op& op = g.op(c);
      for (int k = 0; k < static_cast<int>(op.inputs.size()); ++k) {
        if (op.inputs[k] != t) continue;
        if (PassesValuesOn(op, k)) {
          for (int out : op.outputs) {
            if (out >= 0 && seen.insert(out).second) stack.push_back(out);
          }
        } else {
          visit(op, k);
        }
      }
    }
  }
}

// The size of dim `axis` of input `k` of `op`, or 0.
int64_t DimOf(const Graph& g, const Op& op, size_t k, int64_t axis) {
  if (k >= op.inputs.size() || op.inputs[k] < 0) return 0;
  const Tensor& t = g.tensor(op.inputs[k]);
  const int64_t rank = static_cast<int64_t>(t.shape.size());
  if (axis < 0) axis += rank;
  if (!t.shape_known || axis < 0 || axis >= rank) return 0;
  return t.shape[axis];
}

}  // namespace

int64_t IndexBound(const Graph& g, int tensor) {
  int64_t bound = 0;
  ForEachValueUse(g, tensor, [&](const Op& op, int position) {
    int64_t b = 0;
    if (position == 1 &&
        (op.op_type == "Gather" || op.op_type == "GatherElements")) {
      b = DimOf(g, op, 0, op.IntAttribute("axis", 0));
    } else if (position == 1 && (op.op_type == "SoftmaxCrossEntropyLoss" ||
                                 op.op_type == "NegativeLogLikelihoodLoss")) {
      b = DimOf(g, op, 0, 1);
    }
    if (b > 0) bound = bound == 0 ? b : std::min(bound, b);
  });
  return bound;
}

bool IsMaskInput(const Graph& g, int tensor) {
  bool mask = false;
  ForEachValueUse(g, tensor, [&](const Op& op, int) {
    static const absl::flat_hash_set<std::string> kMaskUses = {
        "Equal", "Not", "Less",  "Greater", "LessOrEqual", "GreaterOrEqual",
        "Cast",  "Mul", "Where", "And",     "Or",          "Sub"};
    if (op.domain.empty() && kMaskUses.contains(op.op_type)) mask = true;
  });
  return mask;
}

torch::Tensor DrawMask(const std::vector<int64_t>& shape,
                       torch::ScalarType type, torch::Generator& gen) {
  torch::Tensor mask = torch::ones(shape, torch::TensorOptions().dtype(type));
  if (shape.size() < 2 || shape.back() < 2) return mask;
  const int64_t rows = shape[0];
  const int64_t length = shape.back();
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t padded =
        torch::randint(0, length / 2 + 1, {1}, gen).item<int64_t>();
    if (padded > 0) {
      mask.select(0, r).narrow(-1, length - padded, padded).fill_(0);
    }
  }
  return mask;
}

absl::StatusOr<HostValues> DrawHostValues(
    const TrainingView& view, uint64_t seed,
    const std::map<std::string, InputValues>& given) {
  const Graph& graph = view.forward();
  for (const auto& [name, spec] : given) {
    const int t = graph.FindTensor(name);
    if (t < 0 || graph.tensor(t).kind != TensorKind::kGraphInput ||
        Folded(graph.tensor(t))) {
      std::vector<std::string> inputs;
      for (int in : graph.inputs()) {
        if (!Folded(graph.tensor(in))) inputs.push_back(graph.tensor(in).name);
      }
      return absl::InvalidArgumentError(
          absl::StrCat("--input-values names '", name,
                       "', which is no graph input; the inputs are ",
                       absl::StrJoin(inputs, ", ")));
    }
  }
  const int values = static_cast<int>(view.values().size());
  torch::Generator gen = at::detail::createCPUGenerator(seed);
  HostValues out;
  out.value.assign(values, torch::Tensor());
  out.target.assign(graph.tensors().size(), torch::Tensor());
  std::vector<std::string> errors;
  for (int v = 0; v < values; ++v) {
    const TrainingValue& value = view.value(v);
    if (value.producer >= 0 || value.tensor < 0) continue;
    const Tensor& t = graph.tensor(value.tensor);
    torch::Tensor host;
    if (Folded(t)) {
      absl::StatusOr<torch::Tensor> data = TensorFromData(*t.data);
      if (!data.ok()) {
        errors.push_back(
            absl::StrCat("'", t.name, "': ", data.status().message()));
        continue;
      }
      host = *data;
    } else if (!t.shape_known) {
      errors.push_back(absl::StrCat("'", t.name, "' has no known shape"));
      continue;
    } else if (value.kind == ValueKind::kParameter) {
      host = InitParameter(graph, t, gen);
    } else if (auto it = given.find(t.name);
               value.kind == ValueKind::kGraphInput && it != given.end()) {
      ASSIGN_OR_RETURN(
          torch::Tensor made,
          MakeInputValues(
              t, it->second,
              IsFloatingPoint(t.dtype) ? 0 : IndexBound(graph, value.tensor),
              gen));
      host = std::move(made);
    } else if (value.kind == ValueKind::kGraphInput) {
      torch::ScalarType type = ToTorchType(t.dtype);
      if (IsFloatingPoint(t.dtype)) {
        host = torch::randn(t.shape, gen, torch::TensorOptions().dtype(type));
      } else {
        int64_t bound = IndexBound(graph, value.tensor);
        if (bound > 0) {
          host = torch::randint(0, bound, t.shape, gen,
                                torch::TensorOptions().dtype(type));
        } else if (IsMaskInput(graph, value.tensor)) {
          host = DrawMask(t.shape, type, gen);
        } else {
          errors.push_back(absl::StrCat(
              "graph input '", t.name, "' (", DataTypeName(t.dtype),
              ") reaches no Gather, loss or comparison (through Reshape, "
              "Cast and the like), so its valid values are unknown: give "
              "them with --input-values ",
              t.name, "=range:LO:HI (or value:V, mask, file:PATH)"));
          continue;
        }
      }
    } else if (torch::Tensor state = InitState(graph, value.tensor);
               state.defined()) {
      host = state;
    } else {
      errors.push_back(absl::StrCat("constant '", t.name, "' has no data"));
      continue;
    }
    out.value[v] = host;
  }
  // Loss targets for floating-point outputs that are not scalar losses.
  for (int o : graph.outputs()) {
    const Tensor& t = graph.tensor(o);
    if (!IsFloatingPoint(t.dtype) || !t.shape_known || t.num_elements() <= 1) {
      continue;
    }
    if (t.shape.size() == 2 && t.shape[1] > 1) {
      out.target[o] = torch::randint(0, t.shape[1], {t.shape[0]}, gen,
                                     torch::TensorOptions().dtype(torch::kLong));
    } else {
      out.target[o] = torch::randn(t.shape, gen);
    }
  }
  if (!errors.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("executor: ", absl::StrJoin(errors, "; ")));
  }
  return out;
}

absl::StatusOr<HostValues> DrawBatch(
    const TrainingView& view, uint64_t seed,
    const std::map<std::string, InputValues>& given) {
  absl::StatusOr<HostValues> drawn = DrawHostValues(view, seed, given);
  if (!drawn.ok()) return drawn;
  for (int v = 0; v < static_cast<int>(view.values().size()); ++v) {
    if (view.value(v).kind != ValueKind::kGraphInput) {
      drawn->value[v] = torch::Tensor();
    }
  }
  return drawn;
}

}  // namespace placer
