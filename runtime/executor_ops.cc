#include "runtime/executor_ops.h"

#include <algorithm>
#include <cstring>

namespace placer {

const std::vector<std::string>& ExecutorOpTypes() {
  static const auto* types = new std::vector<std::string>{
      "Abs",
      "Add",
      "AveragePool",
      "BatchNormalization",
      "Cast",
      "Clip",
      "Concat",
      "Constant",
      "ConstantOfShape",
      "Conv",
      "ConvTranspose",
      "Cos",
      "CumSum",
      "Div",
      "Dropout",
      "Einsum",
      "Equal",
      "Erf",
      "Exp",
      "Expand",
      "Flatten",
      "FusedAttention",
      "FusedElementwise",
      "GRU",
      "Gather",
      "GatherElements",
      "Gelu",
      "Gemm",
      "GlobalAveragePool",
      "Greater",
      "GroupNormalization",
      "HardSigmoid",
      "HardSwish",
      "Identity",
      "InstanceNormalization",
      "LSTM",
      "LayerNormalization",
      "LeakyRelu",
      "Less",
      "Log",
      "LogSoftmax",
      "MatMul",
      "Max",
      "MaxPool",
      "Min",
      "Mul",
      "Neg",
      "Not",
      "Pad",
      "Pow",
      "RNN",
      "Range",
      "Reciprocal",
      "ReduceMax",
      "ReduceMean",
      "ReduceMin",
      "ReduceSum",
      "Relu",
      "Reshape",
      "Resize",
      "ScatterElements",
      "ScatterND",
      "Shape",
      "Sigmoid",
      "Sin",
      "Slice",
      "Softmax",
      "SoftmaxCrossEntropyLoss",
      "Split",
      "Sqrt",
      "Squeeze",
      "Sub",
      "Sum",
      "Tanh",
      "Tile",
      "TopK",
      "Transpose",
      "Trilu",
      "Unsqueeze",
      "Where",
  };
  return *types;
}

bool ExecutorHasKernel(absl::string_view domain, absl::string_view op_type) {
  if (!IsTableDomain(domain)) return false;
  const std::vector<std::string>& types = ExecutorOpTypes();
  return std::binary_search(types.begin(), types.end(), op_type);
}

bool DrawsRandomNumbers(const Graph& graph, const Op& op) {
  if (!op.domain.empty() && op.domain != "ai.onnx") return false;
  if (op.op_type == "Dropout") {
    if (op.inputs.size() <= 2 || op.inputs[2] < 0) return false;
    // The importer's constants: a training mode of false, a ratio of 0.
    auto constant = [&](int i) -> const TensorData* {
      const Tensor& t = graph.tensor(op.inputs[i]);
      return t.data != nullptr && !t.data->raw.empty() ? t.data.get()
                                                       : nullptr;
    };
    if (const TensorData* mode = constant(2);
        mode != nullptr && mode->dtype == DataType::kBool &&
        mode->raw.find_first_not_of('\0') == std::string::npos) {
      return false;
    }
    if (op.inputs[1] >= 0) {
      const TensorData* ratio = constant(1);
      float p = 1;
      if (ratio != nullptr && ratio->dtype == DataType::kFloat32 &&
          ratio->raw.size() == sizeof(float)) {
        std::memcpy(&p, ratio->raw.data(), sizeof(float));
      }
      if (p == 0) return false;
    }
    return true;
  }
  static const auto* generators = new std::vector<std::string>{
      "Bernoulli",        "Multinomial",   "RandomNormal",
      "RandomNormalLike", "RandomUniform", "RandomUniformLike"};
  return std::find(generators->begin(), generators->end(), op.op_type) !=
         generators->end();
}

std::vector<int> OpsUnsupportedByExecutor(const Graph& graph) {
  std::vector<int> ops;
  for (int i = 0; i < static_cast<int>(graph.ops().size()); ++i) {
    const Op& op = graph.op(i);
    if (!ExecutorHasKernel(op.domain, op.op_type)) ops.push_back(i);
  }
  return ops;
}

}  // namespace placer
