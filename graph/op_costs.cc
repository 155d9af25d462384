#include "graph/op_costs.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "graph/einsum.h"
#include "graph/fused_attention.h"
#include "graph/fused_region.h"
#include "graph/saved_for_backward.h"

namespace placer {
namespace {

// Shapes of an op's inputs and outputs; absent ones read as unknown.
class OpShapes {
 public:
  OpShapes(const Op& op, const std::vector<Tensor>& tensors)
      : op_(op), tensors_(tensors) {}

  const Tensor* input(int k) const {
    if (k >= static_cast<int>(op_.inputs.size()) || op_.inputs[k] < 0) {
      return nullptr;
    }
    return &tensors_[op_.inputs[k]];
  }
  const Tensor* output(int k) const {
    if (k >= static_cast<int>(op_.outputs.size()) || op_.outputs[k] < 0) {
      return nullptr;
    }
    return &tensors_[op_.outputs[k]];
  }
  double input_elements(int k) const {
    const Tensor* t = input(k);
    return t == nullptr ? 0 : static_cast<double>(t->num_elements());
  }
  double output_elements(int k) const {
    const Tensor* t = output(k);
    return t == nullptr ? 0 : static_cast<double>(t->num_elements());
  }
  const std::vector<int64_t>& input_shape(int k) const {
    static const std::vector<int64_t> kEmpty;
    const Tensor* t = input(k);
    return t == nullptr ? kEmpty : t->shape;
  }
  bool all_known() const {
    for (int in : op_.inputs) {
      if (in >= 0 && !tensors_[in].shape_known) return false;
    }
    for (int out : op_.outputs) {
      if (out >= 0 && !tensors_[out].shape_known) return false;
    }
    return true;
  }

 private:
  const Op& op_;
  const std::vector<Tensor>& tensors_;
};

using FlopsFn = double (*)(const Op&, const OpShapes&, double per_element);

double PerOutputElement(const Op&, const OpShapes& s, double per_element) {
  double total = 0;
  for (int k = 0; k < 8; ++k) total += s.output_elements(k);
  return per_element * total;
}

double PerFirstInputElement(const Op&, const OpShapes& s, double per_element) {
  return per_element * s.input_elements(0);
}

// Sum/Mean/Max/Min of n inputs: n-1 operations per output element.
double Variadic(const Op& op, const OpShapes& s, double per_element) {
  double n = static_cast<double>(op.inputs.size());
  return per_element * std::max(0.0, n - 1) * s.output_elements(0);
}

double Zero(const Op&, const OpShapes&, double) { return 0; }

double ProductOf(const std::vector<int64_t>& v, size_t from = 0) {
  double p = 1;
  for (size_t i = from; i < v.size(); ++i) p *= static_cast<double>(v[i]);
  return p;
}

// Conv: each output element is a dot product over Cin/group * kernel.
double ConvFlops(const Op& op, const OpShapes& s, double) {
  const auto& w = s.input_shape(1);  // [Cout, Cin/group, k...]
  if (w.size() < 2) return 0;
  double dot = ProductOf(w, 1);
  double flops = 2 * dot * s.output_elements(0);
  if (s.input(2) != nullptr) flops += s.output_elements(0);  // bias
  return flops;
}

// ConvTranspose: each input element scatters into Cout/group * kernel.
double ConvTransposeFlops(const Op& op, const OpShapes& s, double) {
  const auto& w = s.input_shape(1);  // [Cin, Cout/group, k...]
  if (w.size() < 2) return 0;
  double flops = 2 * ProductOf(w, 1) * s.input_elements(0);
  if (s.input(2) != nullptr) flops += s.output_elements(0);
  return flops;
}

double MatMulFlops(const Op&, const OpShapes& s, double) {
  const auto& a = s.input_shape(0);
  if (a.empty()) return 0;
  return 2 * static_cast<double>(a.back()) * s.output_elements(0);
}

double GemmFlops(const Op& op, const OpShapes& s, double) {
  const auto& a = s.input_shape(0);
  if (a.size() != 2) return 0;
  double k = static_cast<double>(op.IntAttribute("transA", 0) ? a[0] : a[1]);
  double flops = 2 * k * s.output_elements(0);
  if (s.input(2) != nullptr) flops += s.output_elements(0);
  return flops;
}

double PoolFlops(const Op& op, const OpShapes& s, double) {
  return ProductOf(op.IntsAttribute("kernel_shape")) * s.output_elements(0);
}

// Fused recurrent layers (ONNX LSTM/GRU/RNN): X is [T, B, I] (layout 0) or
// [B, T, I] (layout 1); W is [dirs, gates*H, I].
double RecurrentFlops(const Op& op, const OpShapes& s, double gate_elementwise) {
  const auto& x = s.input_shape(0);
  const auto& w = s.input_shape(1);
  if (x.size() != 3 || w.size() != 3) return 0;
  double dirs = static_cast<double>(w[0]);
  double gates_h = static_cast<double>(w[1]);
  double input = static_cast<double>(w[2]);
  double hidden = static_cast<double>(op.IntAttribute("hidden_size", 0));
  if (hidden <= 0) return 0;
  bool batch_first = op.IntAttribute("layout", 0) == 1;
  double steps = static_cast<double>(batch_first ? x[1] : x[0]);
  double batch = static_cast<double>(batch_first ? x[0] : x[1]);
  double per_step = 2 * gates_h * (input + hidden) + gates_h +
                    gate_elementwise * hidden;
  return dirs * steps * batch * per_step;
}

// Einsum: 2 FLOPs for every point of the full index space.
double EinsumFlops(const Op& op, const OpShapes& s, double) {
  const AttributeValue* eq = op.FindAttribute("equation");
  if (eq == nullptr) return 0;
  absl::StatusOr<EinsumEquation> equation = ParseEinsum(eq->s);
  if (!equation.ok()) return 0;
  std::vector<std::vector<int64_t>> shapes;
  for (size_t k = 0; k < op.inputs.size(); ++k) {
    shapes.push_back(s.input_shape(static_cast<int>(k)));
  }
  return 2 * EinsumPoints(*equation, shapes).value_or(0);
}

// FusedAttention [Q, Kᵀ, V, ...] -> O: the scores' product (2 per score
// and contracted element), the probabilities times V (2 per score and
// output feature), and per score 1 FLOP for each elementwise step and 5
// for the softmax. No seq x seq tensor is read or written.
// Scores of a FusedAttention op: its output's rows times the keys; with a
// causal mask (the op's `causal` attribute) only those on and below the
// diagonal, rows x (keys + 1) / 2, since FlashAttention skips the blocks
// above it.
double AttentionScores(const Op& op, const OpShapes& s) {
  const auto& kt = s.input_shape(1);
  const auto& v = s.input_shape(2);
  if (kt.empty() || v.empty() || v.back() == 0) return 0;
  const double rows = s.output_elements(0) / static_cast<double>(v.back());
  const double keys = static_cast<double>(kt.back());
  if (IsCausalAttention(op)) return rows * (keys + 1) / 2;
  return rows * keys;
}

double AttentionProducts(const Op& op, const OpShapes& s) {
  const auto& q = s.input_shape(0);
  const auto& v = s.input_shape(2);
  if (q.empty() || v.empty()) return 0;
  return 2 * AttentionScores(op, s) *
         static_cast<double>(q.back() + v.back());
}

double AttentionElementwise(const Op& op, const OpShapes& s) {
  return AttentionScores(op, s) *
         (5 + static_cast<double>(AttentionSteps(op).size()));
}

double AttentionFlops(const Op& op, const OpShapes& s, double) {
  return AttentionProducts(op, s) + AttentionElementwise(op, s);
}

// FusedElementwise: the FLOPs of the ops of its body.
double RegionFlops(const Op& op, const OpShapes&, double) {
  const Graph* body = RegionBody(op);
  if (body == nullptr) return 0;
  double flops = 0;
  for (const Op& member : body->ops()) {
    flops += ComputeForwardCost(member, body->tensors()).flops;
  }
  return flops;
}

struct Entry {
  OpCostRule rule;
  FlopsFn flops;
  double per_element;
  CostStatus status;
};

using Table = absl::flat_hash_map<std::string, Entry>;

void Add(Table& t, std::initializer_list<const char*> types, Entry e) {
  for (const char* type : types) t.emplace(type, e);
}

const Table& CostTable() {
  static const Table* table = [] {
    auto* t = new Table();
    const OpCostRule same{GradientRule::kSamePass, {}};
    const OpCostRule none{GradientRule::kNone, {}};
    const auto exact = CostStatus::kExact;
    const auto estimated = CostStatus::kEstimated;

    Add(*t, {"Conv"}, {{GradientRule::kPerInput, {0, 1}}, ConvFlops, 0, exact});
    Add(*t, {"ConvTranspose"},
        {{GradientRule::kPerInput, {0, 1}}, ConvTransposeFlops, 0, exact});
    Add(*t, {"MatMul"},
        {{GradientRule::kPerInput, {0, 1}}, MatMulFlops, 0, exact});
    Add(*t, {kFusedAttentionType},
        {{GradientRule::kAttention, {0, 1, 2}}, AttentionFlops, 0, exact});
    Add(*t, {kFusedRegionType}, {{GradientRule::kRegion, {}}, RegionFlops, 0,
                                 exact});
    Add(*t, {"Gemm"}, {{GradientRule::kPerInput, {0, 1}}, GemmFlops, 0, exact});
    Add(*t, {"Einsum"},
        {{GradientRule::kPerInput, {0, 1}}, EinsumFlops, 0, exact});
    // Gate nonlinearities and cell updates per hidden unit and step.
    // Backward: the gradient flowing back through the gates to X and to
    // the previous hidden state (through R) is one forward pass, the
    // weight gradients of W and R another; so X and W are the operands
    // and R's gradient rides with W's (counted as the output-sized rest).
    Add(*t, {"LSTM"},
        {{GradientRule::kPerInput, {0, 1}}, RecurrentFlops, 17, exact});
    Add(*t, {"GRU"},
        {{GradientRule::kPerInput, {0, 1}}, RecurrentFlops, 14, exact});
    Add(*t, {"RNN"},
        {{GradientRule::kPerInput, {0, 1}}, RecurrentFlops, 4, exact});

    // Elementwise arithmetic: 1 FLOP per output element.
    Add(*t,
        {"Add", "Sub", "Mul", "Div", "Max", "Min", "Neg", "Abs", "Relu",
         "LeakyRelu", "PRelu", "Clip", "Sign", "Reciprocal", "Floor", "Ceil",
         "Round", "Mod", "ThresholdedRelu", "Shrink"},
        {same, PerOutputElement, 1, exact});
    Add(*t, {"Sum", "Mean"}, {same, Variadic, 1, exact});
    // Transcendental and composite activations: a few FLOPs each.
    Add(*t, {"Sqrt", "Exp", "Log", "Erf", "Sin", "Cos", "Tan", "Asin",
             "Acos", "Atan", "Sinh", "Cosh", "Asinh", "Acosh", "Atanh"},
        {same, PerOutputElement, 4, exact});
    Add(*t, {"Sigmoid", "Tanh", "Elu", "Selu", "Celu", "Softplus",
             "Softsign", "HardSigmoid", "HardSwish", "Mish", "Pow"},
        {same, PerOutputElement, 4, exact});
    Add(*t, {"Gelu"}, {same, PerOutputElement, 8, exact});
    Add(*t, {"Where"}, {same, PerOutputElement, 1, exact});
    Add(*t, {"Softmax", "LogSoftmax", "Hardmax"},
        {same, PerOutputElement, 5, exact});
    Add(*t, {"BatchNormalization"},
        {{GradientRule::kSamePass, {}, {3, 4}}, PerFirstInputElement, 5,
         exact});
    Add(*t, {"InstanceNormalization"}, {same, PerFirstInputElement, 5, exact});
    Add(*t, {"LayerNormalization", "GroupNormalization"},
        {same, PerFirstInputElement, 8, exact});
    Add(*t, {"LRN"}, {same, PerOutputElement, 8, exact});
    Add(*t, {"Dropout"}, {same, PerOutputElement, 2, exact});
    Add(*t, {"MaxPool", "AveragePool", "LpPool"}, {same, PoolFlops, 0, exact});
    Add(*t, {"GlobalAveragePool", "GlobalMaxPool", "GlobalLpPool",
             "ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin",
             "ReduceProd", "ReduceL1", "ReduceL2", "ReduceSumSquare",
             "ReduceLogSum", "ReduceLogSumExp", "CumSum"},
        {same, PerFirstInputElement, 1, exact});
    Add(*t, {"SoftmaxCrossEntropyLoss", "NegativeLogLikelihoodLoss"},
        {same, PerFirstInputElement, 5, exact});

    // Data movement: no FLOPs, bytes only; gradients flow through.
    Add(*t, {"Identity", "Reshape", "Flatten", "Squeeze", "Unsqueeze",
             "Transpose", "Concat", "Split", "Slice", "Gather",
             "GatherElements", "GatherND", "Expand", "Tile", "Pad",
             "SpaceToDepth", "DepthToSpace", "ScatterND", "ScatterElements",
             "ReverseSequence", "Compress", "Trilu"},
        {same, Zero, 0, exact});
    Add(*t, {"Resize", "Upsample"}, {same, PerOutputElement, 4, estimated});
    Add(*t, {"TopK"}, {same, PerFirstInputElement, 2, estimated});

    // No gradient: shape arithmetic, comparisons, generators, casts.
    Add(*t, {"Shape", "Size", "Constant", "ConstantOfShape", "Range",
             "NonZero", "EyeLike", "RandomNormal", "RandomUniform",
             "RandomNormalLike", "RandomUniformLike", "Bernoulli",
             "Multinomial", "OneHot"},
        {none, Zero, 0, exact});
    Add(*t, {"Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual",
             "Not", "And", "Or", "Xor", "IsNaN", "IsInf", "BitShift"},
        {none, PerOutputElement, 1, exact});
    Add(*t, {"ArgMax", "ArgMin"}, {none, PerFirstInputElement, 1, exact});
    Add(*t, {"NonMaxSuppression"}, {none, PerFirstInputElement, 4, estimated});
    // Cast passes gradients between floating-point types only; the
    // training view checks dtypes.
    Add(*t, {"Cast", "CastLike"}, {same, Zero, 0, exact});
    return t;
  }();
  return *table;
}

int64_t KnownBytes(const Tensor* t) {
  return t != nullptr && t->shape_known ? t->bytes() : 0;
}

}  // namespace

const OpCostRule* FindOpCostRule(absl::string_view domain,
                                 absl::string_view op_type) {
  if (!IsTableDomain(domain)) return nullptr;
  const Table& table = CostTable();
  auto it = table.find(op_type);
  return it == table.end() ? nullptr : &it->second.rule;
}

bool IsStateInput(const Op& op, int k) {
  const OpCostRule* rule = FindOpCostRule(op.domain, op.op_type);
  if (rule == nullptr) return false;
  return std::find(rule->non_trainable_inputs.begin(),
                   rule->non_trainable_inputs.end(),
                   k) != rule->non_trainable_inputs.end();
}

OpCost ComputeForwardCost(const Op& op, const std::vector<Tensor>& tensors) {
  OpCost cost;
  OpShapes shapes(op, tensors);
  for (int in : op.inputs) {
    if (in >= 0) cost.bytes_accessed += KnownBytes(&tensors[in]);
  }
  for (int out : op.outputs) {
    if (out >= 0) cost.bytes_accessed += KnownBytes(&tensors[out]);
  }
  if (!IsTableDomain(op.domain)) return cost;  // unknown
  const Table& table = CostTable();
  auto it = table.find(op.op_type);
  if (it == table.end() || !shapes.all_known()) return cost;  // unknown
  const Entry& e = it->second;
  cost.flops = e.flops(op, shapes, e.per_element);
  cost.status = e.status;
  return cost;
}

namespace {

// The backward of a FusedElementwise op (GradientRule::kRegion).
OpCost RegionBackwardCost(const Op& op, const std::vector<Tensor>& tensors,
                          const std::vector<bool>& input_needs_grad) {
  OpCost cost;
  cost.status = CostStatus::kUnknown;
  const Graph* body = RegionBody(op);
  if (body == nullptr) return cost;
  const OpCost forward = ComputeForwardCost(op, tensors);
  cost.status = forward.status;
  for (int out : op.outputs) {
    if (out >= 0) cost.bytes_accessed += KnownBytes(&tensors[out]);
  }
  const SavedTensors saved = SavedForBackward(op);
  for (int k : saved.inputs) {
    cost.bytes_accessed += KnownBytes(&tensors[op.inputs[k]]);
  }
  for (int k : saved.outputs) {
    cost.bytes_accessed += KnownBytes(&tensors[op.outputs[k]]);
  }
  // Which body tensors need a gradient: the inputs the op's backward
  // writes one for, then the floating-point outputs of the body ops that
  // read one of those.
  const std::vector<Tensor>& inner = body->tensors();
  std::vector<bool> needs(inner.size(), false);
  bool any = false;
  for (size_t k = 0; k < op.inputs.size() && k < input_needs_grad.size();
       ++k) {
    if (op.inputs[k] < 0 || !input_needs_grad[k]) continue;
    needs[k] = true;
    any = true;
    cost.bytes_accessed += KnownBytes(&tensors[op.inputs[k]]);
  }
  if (!any) return cost;
  cost.flops = forward.flops;  // the body recomputed
  for (int m : body->topological_order()) {
    const Op& member = body->op(m);
    std::vector<bool> member_needs;
    bool reads = false;
    for (int in : member.inputs) {
      member_needs.push_back(in >= 0 && needs[in]);
      reads |= member_needs.back();
    }
    if (!reads) continue;
    const OpCost b = ComputeBackwardCost(member, inner, member_needs);
    cost.flops += b.flops;
    const OpCostRule* rule = FindOpCostRule(member.domain, member.op_type);
    if (rule != nullptr && rule->gradient == GradientRule::kNone) continue;
    for (int out : member.outputs) {
      if (out >= 0 && IsFloatingPoint(inner[out].dtype)) needs[out] = true;
    }
  }
  return cost;
}

}  // namespace

OpCost ComputeBackwardCost(const Op& op, const std::vector<Tensor>& tensors,
                           const std::vector<bool>& input_needs_grad) {
  if (IsFusedRegion(op)) {
    return RegionBackwardCost(op, tensors, input_needs_grad);
  }
  OpCost forward = ComputeForwardCost(op, tensors);
  OpCost cost;
  cost.status = forward.status;
  for (int out : op.outputs) {
    if (out >= 0) cost.bytes_accessed += KnownBytes(&tensors[out]);
  }
  bool any = false;
  for (int k = 0; k < static_cast<int>(op.inputs.size()); ++k) {
    if (op.inputs[k] < 0) continue;
    const Tensor& t = tensors[op.inputs[k]];
    cost.bytes_accessed += KnownBytes(&t);  // saved activation read
    if (k < static_cast<int>(input_needs_grad.size()) && input_needs_grad[k]) {
      cost.bytes_accessed += KnownBytes(&t);  // gradient written
      any = true;
    }
  }
  const OpCostRule* rule = FindOpCostRule(op.domain, op.op_type);
  if (rule == nullptr || !any) return cost;
  switch (rule->gradient) {
    case GradientRule::kNone:
    case GradientRule::kRegion:  // RegionBackwardCost
      break;
    case GradientRule::kSamePass:
      cost.flops = forward.flops;
      break;
    case GradientRule::kAttention: {
      OpShapes shapes(op, tensors);
      cost.flops = 2.5 * AttentionProducts(op, shapes) +
                   2 * AttentionElementwise(op, shapes);
      break;
    }
    case GradientRule::kPerInput: {
      int operands = 0;
      bool other = false;
      for (int k = 0; k < static_cast<int>(input_needs_grad.size()); ++k) {
        if (!input_needs_grad[k]) continue;
        bool is_operand = false;
        for (int c : rule->contraction_inputs) is_operand |= (c == k);
        if (is_operand) {
          ++operands;
        } else {
          other = true;
        }
      }
      cost.flops = forward.flops * operands;
      // A bias (or initial state) gradient is a reduction over the output.
      if (other) {
        for (int out : op.outputs) {
          if (out >= 0 && tensors[out].shape_known) {
            cost.flops += static_cast<double>(tensors[out].num_elements());
          }
        }
      }
      break;
    }
  }
  return cost;
}

}  // namespace placer
