#include "graph/saved_for_backward.h"

#include <algorithm>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "graph/fused_attention.h"
#include "graph/fused_region.h"

namespace placer {
namespace {

enum class Keeps { kNothing, kOutput0, kInput0, kInput1, kMask };

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

// What a body op's backward reads, given which of its inputs need a
// gradient: a product keeps each operand only for the other's gradient
// (as PyTorch's mul saves `other` only when `self` needs one); every other
// op its table entry.
SavedTensors SavedByBodyOp(const Op& op, const std::vector<bool>& needs) {
  if (op.op_type == "Mul" && op.inputs.size() == 2) {
    SavedTensors saved;
    if (needs[1]) saved.inputs.push_back(0);
    if (needs[0]) saved.inputs.push_back(1);
    return saved;
  }
  return SavedForBackward(op);
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
    const SavedTensors saved = SavedByBodyOp(member, member_needs);
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

namespace {

// A fused recurrent layer's sizes, from its X and attributes; none (gates
// 0) for other ops or when X's shape is unknown.
struct RecurrentShape {
  int64_t gates = 0;           // LSTM 4, GRU 3, RNN 1
  int64_t saved_per_step = 0;  // in hidden-sized rows, see the header
  int64_t rows = 0;            // T x B
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
  const AttributeValue* direction = op.FindAttribute("direction");
  shape.directions =
      direction != nullptr && direction->s == "bidirectional" ? 2 : 1;
  shape.hidden = hidden;
  shape.element_bytes = input.bytes() / input.num_elements();
  return shape;
}

}  // namespace

int64_t SavedWorkspaceBytes(const Op& op, const std::vector<Tensor>& tensors) {
  if (IsFusedAttention(op)) return AttentionLogSumExpBytes(op, tensors);
  const RecurrentShape s = RecurrentShapeOf(op, tensors);
  if (s.gates == 0) return 0;
  int64_t weights = 0;
  for (int k : {1, 2}) {
    if (op.inputs[k] >= 0)
      weights += std::max<int64_t>(0, tensors[op.inputs[k]].bytes());
  }
  return s.saved_per_step * s.rows * s.directions * s.hidden * s.element_bytes +
         weights;
}

int64_t ForwardScratchBytes(const Op& op, const std::vector<Tensor>& tensors) {
  const RecurrentShape s = RecurrentShapeOf(op, tensors);
  // Bidirectional: each direction's outputs too, before they are joined.
  const int64_t outputs = s.directions > 1 ? s.directions : 0;
  return (s.gates + outputs) * s.rows * s.hidden * s.element_bytes;
}

}  // namespace placer
