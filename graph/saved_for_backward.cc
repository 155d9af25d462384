#include "graph/saved_for_backward.h"

#include <algorithm>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "graph/fused_attention.h"
#include "graph/fused_region.h"

namespace placer {
namespace {

enum class Keeps {
  kNothing,
  kOutput0,
  kInput0,
  kInput1,
  kMask,
  kDataAndWeight,  // inputs 0 and 1
  kAllButInput2,   // every input but the bias
};

const absl::flat_hash_map<std::string, Keeps>& Table() {
  static const auto* table = new absl::flat_hash_map<std::string, Keeps>{
      // Sizes only: the backward is a reshape, slice, pad, sum or
      // broadcast of the output gradient.
      {"Add", Keeps::kNothing},
      {"Sub", Keeps::kNothing},
      {"Sum", Keeps::kNothing},
      {"Neg", Keeps::kNothing},
      {"Identity", Keeps::kNothing},
      {"Cast", Keeps::kNothing},
      {"Concat", Keeps::kNothing},
      {"Split", Keeps::kNothing},
      {"Slice", Keeps::kNothing},
      {"Reshape", Keeps::kNothing},
      {"Flatten", Keeps::kNothing},
      {"Transpose", Keeps::kNothing},
      {"Squeeze", Keeps::kNothing},
      {"Unsqueeze", Keeps::kNothing},
      {"Expand", Keeps::kNothing},
      {"Tile", Keeps::kNothing},
      {"ReduceMean", Keeps::kNothing},
      {"ReduceSum", Keeps::kNothing},
      {"GlobalAveragePool", Keeps::kNothing},
      {"Pad", Keeps::kNothing},
      // upsample_nearest / _bilinear: the backward needs the input's sizes.
      {"Resize", Keeps::kNothing},
      {"Upsample", Keeps::kNothing},
      // d/dx f(x) written in terms of y = f(x).
      {"Relu", Keeps::kOutput0},
      {"Sigmoid", Keeps::kOutput0},
      {"Tanh", Keeps::kOutput0},
      {"Exp", Keeps::kOutput0},
      {"Sqrt", Keeps::kOutput0},
      {"Reciprocal", Keeps::kOutput0},
      {"Softmax", Keeps::kOutput0},
      {"LogSoftmax", Keeps::kOutput0},
      // index_select keeps its indices; where keeps its condition.
      {"Gather", Keeps::kInput1},
      {"ScatterElements", Keeps::kInput1},
      // convolution keeps its input and weight (of the bias, the sizes);
      // batch_norm its input, scale and running statistics.
      {"Conv", Keeps::kDataAndWeight},
      {"ConvTranspose", Keeps::kDataAndWeight},
      {"BatchNormalization", Keeps::kAllButInput2},
      {"Where", Keeps::kInput0},
      // native_dropout keeps its mask (bool), the op's second output.
      {"Dropout", Keeps::kMask},
  };
  return *table;
}

bool DefaultDomain(absl::string_view domain) {
  return domain.empty() || domain == "ai.onnx";
}

// Pad keeps nothing in constant mode (its backward slices); reflect and
// edge read the input.
bool PadReadsInput(const Op& op) {
  const AttributeValue* mode = op.FindAttribute("mode");
  return op.op_type == "Pad" && mode != nullptr && mode->s != "constant";
}

// A FusedElementwise op keeps, of its inputs and outputs, those from which
// the tensors its body's backward reads are recomputed: a tensor the op
// writes or reads is kept as it is; one between its ops is recomputed from
// the tensors its producer reads, in turn.
SavedTensors SavedByRegion(const Op& op, const Graph& body) {
  const std::vector<Tensor>& tensors = body.tensors();
  const int inputs = static_cast<int>(op.inputs.size());
  std::vector<bool> needs(tensors.size(), false);
  for (int k = 0; k < inputs && k < static_cast<int>(tensors.size()); ++k) {
    const Tensor& t = tensors[k];
    needs[k] = (t.kind == TensorKind::kGraphInput ||
                t.kind == TensorKind::kParameter) &&
               IsFloatingPoint(t.dtype);
  }
  std::vector<int> output_of(tensors.size(), -1);
  for (int j = 0; j < static_cast<int>(body.outputs().size()); ++j) {
    output_of[body.outputs()[j]] = j;
  }
  std::vector<char> kept_input(inputs, 0);
  std::vector<char> kept_output(body.outputs().size(), 0);
  std::vector<char> visited(tensors.size(), 0);
  std::vector<int> stack;
  auto keep = [&](int t) {
    if (t >= 0 && !visited[t]) {
      visited[t] = 1;
      stack.push_back(t);
    }
  };
  for (int m : body.topological_order()) {
    const Op& member = body.op(m);
    std::vector<bool> member_needs;
    bool any = false;
    for (int in : member.inputs) {
      member_needs.push_back(in >= 0 && needs[in]);
      any |= member_needs.back();
    }
    if (!any) continue;
    for (int out : member.outputs) {
      if (out >= 0 && IsFloatingPoint(tensors[out].dtype)) needs[out] = true;
    }
    const SavedTensors saved = SavedForBackward(member, member_needs);
    for (int k : saved.inputs) {
      if (k < static_cast<int>(member.inputs.size())) keep(member.inputs[k]);
    }
    for (int k : saved.outputs) {
      if (k < static_cast<int>(member.outputs.size())) keep(member.outputs[k]);
    }
  }
  while (!stack.empty()) {
    const int t = stack.back();
    stack.pop_back();
    if (t < inputs) {
      kept_input[t] = 1;
    } else if (output_of[t] >= 0) {
      kept_output[output_of[t]] = 1;
    } else if (tensors[t].producer >= 0) {
      for (int in : body.op(tensors[t].producer).inputs) keep(in);
    }
  }
  // Constants and integer or bool inputs (shapes, indices, masks) are
  // kept too: the recomputation's shapes and selections need them.
  SavedTensors saved;
  for (int k = 0; k < inputs; ++k) {
    const Tensor& t = tensors[k];
    if (kept_input[k] || t.kind == TensorKind::kConstant ||
        !IsFloatingPoint(t.dtype)) {
      saved.inputs.push_back(k);
    }
  }
  for (int j = 0; j < static_cast<int>(kept_output.size()); ++j) {
    if (kept_output[j]) saved.outputs.push_back(j);
  }
  return saved;
}

}  // namespace

SavedTensors SavedForBackward(const Op& op) {
  SavedTensors saved;
  if (const Graph* body = RegionBody(op); body != nullptr) {
    return SavedByRegion(op, *body);
  }
  if (IsFusedAttention(op)) {
    // FlashAttention keeps its inputs and its output (and a log-sum-exp
    // per query row: SavedWorkspaceBytes).
    for (int k = 0; k < static_cast<int>(op.inputs.size()); ++k) {
      saved.inputs.push_back(k);
    }
    saved.outputs.push_back(0);
    return saved;
  }
  if (DefaultDomain(op.domain) &&
      (op.op_type == "LSTM" || op.op_type == "GRU" || op.op_type == "RNN")) {
    // W, R and B (1-3) are read through their gate-reordered copies.
    for (int k = 0; k < static_cast<int>(op.inputs.size()); ++k) {
      if (k < 1 || k > 3) saved.inputs.push_back(k);
    }
    return saved;
  }
  auto it = DefaultDomain(op.domain) ? Table().find(op.op_type) : Table().end();
  if (it == Table().end() || PadReadsInput(op)) {
    for (int k = 0; k < static_cast<int>(op.inputs.size()); ++k) {
      saved.inputs.push_back(k);
    }
    return saved;
  }
  switch (it->second) {
    case Keeps::kNothing:
      break;
    case Keeps::kOutput0:
      saved.outputs.push_back(0);
      break;
    case Keeps::kInput0:
      saved.inputs.push_back(0);
      break;
    case Keeps::kInput1:
      saved.inputs.push_back(1);
      break;
    case Keeps::kDataAndWeight:
      saved.inputs.push_back(0);
      if (op.inputs.size() > 1) saved.inputs.push_back(1);
      break;
    case Keeps::kAllButInput2:
      for (int k = 0; k < static_cast<int>(op.inputs.size()); ++k) {
        if (k != 2) saved.inputs.push_back(k);
      }
      break;
    case Keeps::kMask:
      // Without a mask output the mask is no value of the graph: its
      // input stands in for it (a float per element, not a byte).
      if (op.outputs.size() > 1 && op.outputs[1] >= 0) {
        saved.outputs.push_back(1);
      } else {
        saved.inputs.push_back(0);
      }
      break;
  }
  return saved;
}

SavedTensors SavedForBackward(const Op& op,
                              const std::vector<bool>& needs_gradient) {
  auto needs = [&](int k) {
    return k < static_cast<int>(needs_gradient.size()) && needs_gradient[k];
  };
  if (!DefaultDomain(op.domain) || op.inputs.size() < 2) {
    return SavedForBackward(op);
  }
  // PyTorch's mul, mm and bmm save `self` only for `other`'s gradient and
  // `other` only for `self`'s; Gemm runs matmul(A, B), then scales and adds
  // C, which keep nothing of them.
  const bool product = (op.op_type == "Mul" && op.inputs.size() == 2) ||
                       (op.op_type == "MatMul" && op.inputs.size() == 2) ||
                       op.op_type == "Gemm";
  SavedTensors saved;
  if (product) {
    if (needs(1)) saved.inputs.push_back(0);
    if (needs(0)) saved.inputs.push_back(1);
    return saved;
  }
  // div: self's gradient is grad / other; other's, -grad * self / other^2.
  if (op.op_type == "Div" && op.inputs.size() == 2) {
    if (needs(1)) saved.inputs.push_back(0);
    if (needs(0) || needs(1)) saved.inputs.push_back(1);
    return saved;
  }
  return SavedForBackward(op);
}

namespace {

// A fused recurrent layer's sizes, from its X and attributes; none (gates
// 0) for other ops or when X's shape is unknown.
struct RecurrentShape {
  int64_t gates = 0;           // LSTM 4, GRU 3, RNN 1
  int64_t saved_per_step = 0;  // in hidden-sized rows, see the header
  int64_t rows = 0;            // T x B
  int64_t batch = 0;           // B
  int64_t given_states = 0;    // initial states among the inputs
  int64_t directions = 1;
  int64_t hidden = 0;
  int64_t element_bytes = 0;
};

RecurrentShape RecurrentShapeOf(const Op& op,
                                const std::vector<Tensor>& tensors) {
  RecurrentShape shape;
  if (!DefaultDomain(op.domain) || op.inputs.size() < 3 || op.inputs[0] < 0) {
    return shape;
  }
  const int64_t gates = op.op_type == "LSTM"  ? 4
                        : op.op_type == "GRU" ? 3
                        : op.op_type == "RNN" ? 1
                                              : 0;
  const Tensor& input = tensors[op.inputs[0]];
  const int64_t hidden = op.IntAttribute("hidden_size", 0);
  if (gates == 0 || !input.shape_known || input.shape.size() != 3 ||
      hidden <= 0 || input.num_elements() <= 0 || input.bytes() <= 0) {
    return shape;
  }
  shape.gates = gates;
  shape.saved_per_step = gates == 1 ? 2 : 7;
  // X is [T, B, I], or [B, T, I] with layout 1: T x B either way.
  shape.rows = input.shape[0] * input.shape[1];
  shape.batch = input.shape[op.IntAttribute("layout", 0) == 0 ? 1 : 0];
  // initial_h (5) and, of an LSTM, initial_c (6).
  for (size_t k = 5; k < op.inputs.size() && k < (gates == 4 ? 7u : 6u); ++k) {
    shape.given_states += op.inputs[k] >= 0;
  }
  const AttributeValue* direction = op.FindAttribute("direction");
  shape.directions =
      direction != nullptr && direction->s == "bidirectional" ? 2 : 1;
  shape.hidden = hidden;
  shape.element_bytes = input.bytes() / input.num_elements();
  return shape;
}

// Known elements of `t`, 0 when its shape is not.
int64_t KnownElements(const Tensor& t) {
  return t.shape_known ? std::max<int64_t>(0, t.num_elements()) : 0;
}

// A normalization's saved statistics and a max pool's argmax (see the
// header); 0 for any other op.
int64_t StatisticsAndIndicesBytes(const Op& op,
                                  const std::vector<Tensor>& tensors) {
  if (!DefaultDomain(op.domain) || op.inputs.empty() || op.inputs[0] < 0 ||
      op.outputs.empty() || op.outputs[0] < 0) {
    return 0;
  }
  const Tensor& x = tensors[op.inputs[0]];
  // Statistics are kept at float precision below it (the kernels' accumulate
  // type), at double for double inputs.
  const int64_t statistic = x.dtype == DataType::kFloat64 ? 8 : 4;
  const int64_t rank = static_cast<int64_t>(x.shape.size());
  if (op.op_type == "MaxPool") {
    return KnownElements(tensors[op.outputs[0]]) * 8;  // int64 indices
  }
  if (!x.shape_known || rank < 2) return 0;
  if (op.op_type == "BatchNormalization") {
    const AttributeValue* mode = op.FindAttribute("training_mode");
    const bool training =
        mode != nullptr ? mode->i != 0 : op.outputs.size() > 1;
    return training ? 2 * x.shape[1] * statistic : 0;
  }
  if (op.op_type == "InstanceNormalization") {
    // instance_norm runs batch_norm over (sample, channel), its scale
    // repeated per sample: a copy the backward keeps.
    const int64_t rows = x.shape[0] * x.shape[1];
    int64_t scale = 0;
    if (op.inputs.size() > 1 && op.inputs[1] >= 0) {
      const Tensor& s = tensors[op.inputs[1]];
      const int64_t n = KnownElements(s);
      scale = n > 0 ? rows * (s.bytes() / n) : 0;
    }
    return 2 * rows * statistic + scale;
  }
  if (op.op_type == "LayerNormalization") {
    int64_t axis = op.IntAttribute("axis", -1);
    if (axis < 0) axis += rank;
    int64_t rows = 1;
    for (int64_t d = 0; d < axis && d < rank; ++d) rows *= x.shape[d];
    return 2 * rows * statistic;
  }
  return 0;
}

}  // namespace

int64_t SavedWorkspaceBytes(const Op& op, const std::vector<Tensor>& tensors) {
  if (IsFusedAttention(op)) return AttentionLogSumExpBytes(op, tensors);
  if (int64_t kept = StatisticsAndIndicesBytes(op, tensors); kept > 0) {
    return kept;
  }
  const RecurrentShape s = RecurrentShapeOf(op, tensors);
  if (s.gates == 0) return 0;
  int64_t weights = 0;
  for (int k : {1, 2}) {
    if (op.inputs[k] >= 0)
      weights += std::max<int64_t>(0, tensors[op.inputs[k]].bytes());
  }
  // The first step's previous state is the initial one: when given, an
  // input (kept as one, or resident), not a state the layer makes.
  return (s.saved_per_step * s.rows - s.given_states * s.batch) * s.directions *
             s.hidden * s.element_bytes +
         weights;
}

int64_t ForwardScratchBytes(const Op& op, const std::vector<Tensor>& tensors) {
  const RecurrentShape s = RecurrentShapeOf(op, tensors);
  // Bidirectional: each direction's outputs too, before they are joined.
  const int64_t outputs = s.directions > 1 ? s.directions : 0;
  return (s.gates + outputs) * s.rows * s.hidden * s.element_bytes;
}

}  // namespace placer
