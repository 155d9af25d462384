#include "graph/autocast.h"

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "graph/fused_region.h"

namespace placer {
namespace {

const absl::flat_hash_map<absl::string_view, AutocastClass>& ClassTable() {
  static const auto* table =
      new absl::flat_hash_map<absl::string_view, AutocastClass>{
          {"Conv", AutocastClass::kLowerPrecision},
          {"ConvTranspose", AutocastClass::kLowerPrecision},
          {"MatMul", AutocastClass::kLowerPrecision},
          {"Gemm", AutocastClass::kLowerPrecision},
          {"Einsum", AutocastClass::kLowerPrecision},
          // scaled_dot_product_attention: autocast's lower-precision list.
          {"FusedAttention", AutocastClass::kLowerPrecision},
          {"LSTM", AutocastClass::kLowerPrecision},
          {"GRU", AutocastClass::kLowerPrecision},
          {"RNN", AutocastClass::kLowerPrecision},
          {"PRelu", AutocastClass::kLowerPrecision},
          {"Softmax", AutocastClass::kFp32},
          {"LogSoftmax", AutocastClass::kFp32},
          {"LayerNormalization", AutocastClass::kFp32},
          {"GroupNormalization", AutocastClass::kFp32},
          {"InstanceNormalization", AutocastClass::kFp32},
          {"Exp", AutocastClass::kFp32},
          {"Log", AutocastClass::kFp32},
          {"Pow", AutocastClass::kFp32},
          {"Reciprocal", AutocastClass::kFp32},
          {"Softplus", AutocastClass::kFp32},
          {"Acos", AutocastClass::kFp32},
          {"Asin", AutocastClass::kFp32},
          {"Cosh", AutocastClass::kFp32},
          {"Sinh", AutocastClass::kFp32},
          {"Tan", AutocastClass::kFp32},
          {"ReduceSum", AutocastClass::kFp32},
          {"ReduceSumSquare", AutocastClass::kFp32},
          {"ReduceProd", AutocastClass::kFp32},
          {"ReduceLogSum", AutocastClass::kFp32},
          {"ReduceLogSumExp", AutocastClass::kFp32},
          {"ReduceL1", AutocastClass::kFp32},
          {"ReduceL2", AutocastClass::kFp32},
          {"CumSum", AutocastClass::kFp32},
          {"SoftmaxCrossEntropyLoss", AutocastClass::kFp32},
          {"NegativeLogLikelihoodLoss", AutocastClass::kFp32},
          {"Cast", AutocastClass::kKeep},
          {"CastLike", AutocastClass::kKeep},
          {"Shape", AutocastClass::kKeep},
          {"Size", AutocastClass::kKeep},
          {"Range", AutocastClass::kKeep},
          {"ConstantOfShape", AutocastClass::kKeep},
          {"Constant", AutocastClass::kKeep},
          {"EyeLike", AutocastClass::kKeep},
          {"RandomNormal", AutocastClass::kKeep},
          {"RandomNormalLike", AutocastClass::kKeep},
          {"RandomUniform", AutocastClass::kKeep},
          {"RandomUniformLike", AutocastClass::kKeep},
      };
  return *table;
}

// fp32 is wider than either 16-bit type; a step has only one of those.
DataType Wider(DataType a, DataType b) {
  if (a == DataType::kUndefined) return b;
  if (b == DataType::kUndefined) return a;
  if (a == DataType::kFloat64 || b == DataType::kFloat64) {
    return DataType::kFloat64;
  }
  if (a == DataType::kFloat32 || b == DataType::kFloat32) {
    return DataType::kFloat32;
  }
  return a;
}

bool IsInitializer(const Tensor& t) {
  return t.kind == TensorKind::kParameter || t.kind == TensorKind::kConstant;
}

}  // namespace

absl::string_view PrecisionName(Precision precision) {
  switch (precision) {
    case Precision::kFp32:
      return "fp32";
    case Precision::kBf16:
      return "bf16";
    case Precision::kFp16:
      return "fp16";
    case Precision::kFp8:
      return "fp8";
  }
  return "fp32";
}

absl::StatusOr<Precision> ParsePrecision(absl::string_view text) {
  for (Precision p : {Precision::kFp32, Precision::kBf16, Precision::kFp16,
                      Precision::kFp8}) {
    if (text == PrecisionName(p)) return p;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "precision '", text, "': expected fp32, bf16, fp16 or fp8"));
}

DataType ComputeType(Precision precision) {
  switch (precision) {
    case Precision::kFp32:
      return DataType::kFloat32;
    case Precision::kBf16:
      return DataType::kBFloat16;
    case Precision::kFp16:
      return DataType::kFloat16;
    case Precision::kFp8:
      return DataType::kBFloat16;
  }
  return DataType::kFloat32;
}

AutocastClass AutocastClassOf(const Op& op) {
  if (!IsTableDomain(op.domain)) {
    return AutocastClass::kPromote;
  }
  auto it = ClassTable().find(op.op_type);
  return it == ClassTable().end() ? AutocastClass::kPromote : it->second;
}

std::vector<char> WeightTensors(const Graph& graph) {
  std::vector<char> weight(graph.tensors().size(), 0);
  for (size_t t = 0; t < weight.size(); ++t) {
    weight[t] = graph.tensor(t).kind == TensorKind::kParameter;
  }
  for (int i : graph.topological_order()) {
    const Op& op = graph.op(i);
    bool reads_weight = false, only_weights = true;
    for (int in : op.inputs) {
      if (in < 0) continue;
      reads_weight |= weight[in] != 0;
      only_weights &=
          weight[in] != 0 || graph.tensor(in).kind == TensorKind::kConstant;
    }
    for (int out : op.outputs) {
      if (out >= 0) weight[out] = reads_weight && only_weights;
    }
  }
  return weight;
}

std::vector<char> WeightProducts(const Graph& graph) {
  const std::vector<char> weight = WeightTensors(graph);
  std::vector<char> products(graph.ops().size(), 0);
  for (size_t i = 0; i < products.size(); ++i) {
    const Op& op = graph.op(i);
    if (op.op_type != "MatMul" && op.op_type != "Gemm") continue;
    for (int in : op.inputs) products[i] |= in >= 0 && weight[in] != 0;
  }
  return products;
}

std::vector<Precision> OpPrecisions(const Graph& graph, Precision step) {
  const int n = static_cast<int>(graph.ops().size());
  std::vector<Precision> precision(n, Precision::kFp32);
  if (step == Precision::kFp32) return precision;
  const Precision lower = step == Precision::kFp8 ? Precision::kBf16 : step;
  const std::vector<char> products =
      step == Precision::kFp8 ? WeightProducts(graph) : std::vector<char>(n, 0);
  int last_linear = -1;
  for (int i : graph.topological_order()) {
    if (AutocastClassOf(graph.op(i)) != AutocastClass::kLowerPrecision) {
      continue;
    }
    precision[i] = lower;
    if (!products[i]) continue;
    precision[i] = Precision::kFp8;
    last_linear = i;
  }
  if (last_linear >= 0) precision[last_linear] = Precision::kBf16;
  return precision;
}

namespace {

// Retypes `tensors` (graph's, as typed so far) op by op; a FusedElementwise
// op's outputs as its body types them from its inputs' types.
void Retype(const Graph& graph, Precision precision,
            std::vector<Tensor>& tensors) {
  const DataType lower = ComputeType(precision);
  for (int i : graph.topological_order()) {
    const Op& op = graph.op(i);
    if (const Graph* body = RegionBody(op); body != nullptr) {
      std::vector<DataType> input_types;
      for (int in : op.inputs) {
        input_types.push_back(in < 0 ? DataType::kUndefined : tensors[in].dtype);
      }
      const std::vector<Tensor> inner =
          BodyTensors(*body, input_types, precision);
      for (size_t j = 0; j < op.outputs.size() && j < body->outputs().size();
           ++j) {
        if (op.outputs[j] >= 0) {
          tensors[op.outputs[j]].dtype = inner[body->outputs()[j]].dtype;
        }
      }
      continue;
    }
    const AutocastClass kind = AutocastClassOf(op);
    if (kind == AutocastClass::kKeep) continue;
    DataType type = DataType::kFloat32;
    if (kind == AutocastClass::kLowerPrecision) type = lower;
    if (kind == AutocastClass::kPromote) {
      DataType from_activations = DataType::kUndefined;
      DataType from_all = DataType::kUndefined;
      for (int in : op.inputs) {
        if (in < 0 || !IsFloatingPoint(tensors[in].dtype)) continue;
        from_all = Wider(from_all, tensors[in].dtype);
        if (!IsInitializer(tensors[in])) {
          from_activations = Wider(from_activations, tensors[in].dtype);
        }
      }
      type = from_activations != DataType::kUndefined ? from_activations
                                                      : from_all;
      if (type == DataType::kUndefined) continue;
    }
    for (int out : op.outputs) {
      if (out >= 0 && graph.tensor(out).dtype == DataType::kFloat32) {
        tensors[out].dtype = type;
      }
    }
  }
}

}  // namespace

std::vector<Tensor> AutocastTensors(const Graph& graph, Precision precision,
                                    bool parameters) {
  std::vector<Tensor> tensors = graph.tensors();
  if (precision == Precision::kFp32) return tensors;
  if (parameters) {
    for (Tensor& t : tensors) {
      if (t.kind == TensorKind::kParameter && t.dtype == DataType::kFloat32) {
        t.dtype = ComputeType(precision);
      }
    }
  }
  Retype(graph, precision, tensors);
  return tensors;
}

std::vector<Tensor> BodyTensors(const Graph& body,
                                const std::vector<DataType>& input_types,
                                Precision precision) {
  std::vector<Tensor> tensors = body.tensors();
  if (precision == Precision::kFp32) return tensors;
  for (size_t k = 0; k < input_types.size() && k < tensors.size(); ++k) {
    if (input_types[k] != DataType::kUndefined) tensors[k].dtype = input_types[k];
  }
  Retype(body, precision, tensors);
  return tensors;
}

}  // namespace placer
