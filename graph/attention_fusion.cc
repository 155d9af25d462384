#include "graph/attention_fusion.h"

#include <cstring>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_helpers.h"
#include "graph/op_costs.h"

namespace placer {
namespace {

constexpr int kMaxSteps = 8;
// An additive mask value at or below which a score's probability is 0 at
// every precision placer trains at (exp(-1e4) underflows bf16 and fp32).
constexpr double kHidden = -1e4;

// Element `i` of float32, float64, bool or int64 data, when the bytes are
// there.
std::optional<double> Element(const TensorData& data, int64_t i) {
  const size_t at = static_cast<size_t>(i);
  switch (data.dtype) {
    case DataType::kFloat32: {
      if ((at + 1) * 4 > data.raw.size()) return std::nullopt;
      float f;
      std::memcpy(&f, data.raw.data() + at * 4, 4);
      return f;
    }
    case DataType::kFloat64: {
      if ((at + 1) * 8 > data.raw.size()) return std::nullopt;
      double d;
      std::memcpy(&d, data.raw.data() + at * 8, 8);
      return d;
    }
    case DataType::kInt64: {
      if ((at + 1) * 8 > data.raw.size()) return std::nullopt;
      int64_t x;
      std::memcpy(&x, data.raw.data() + at * 8, 8);
      return static_cast<double>(x);
    }
    case DataType::kBool:
      if (at >= data.raw.size()) return std::nullopt;
      return data.raw[at] != 0 ? 1.0 : 0.0;
    default:
      return std::nullopt;
  }
}

bool Standard(const Op& op) {
  return op.domain.empty() || op.domain == "ai.onnx";
}

// One attention core found in the graph.
struct Match {
  int scores_matmul = -1;
  int context_matmul = -1;
  std::vector<int> fused_ops;  // every op of the core, in chain order
  std::vector<AttentionStep> steps;
  std::vector<int> inputs;     // Q, Kᵀ, V, then the steps' other inputs
  bool causal = false;         // a step applies a causal mask
};

class Matcher {
 public:
  explicit Matcher(const Graph& graph) : graph_(graph) {}

  std::optional<Match> At(int matmul) const {
    const Op& first = graph_.op(matmul);
    if (!Standard(first) || first.op_type != "MatMul" ||
        first.inputs.size() != 2 || first.outputs.size() != 1) {
      return std::nullopt;
    }
    for (int in : first.inputs) {
      // Activations or graph inputs, not weights: a linear layer is no
      // attention core.
      if (in < 0 || graph_.tensor(in).kind == TensorKind::kParameter ||
          graph_.tensor(in).kind == TensorKind::kConstant ||
          !graph_.tensor(in).shape_known || graph_.tensor(in).shape.size() < 3) {
        return std::nullopt;
      }
    }
    const Tensor& scores = graph_.tensor(first.outputs[0]);
    if (!scores.shape_known) return std::nullopt;
    Match m;
    m.scores_matmul = matmul;
    m.fused_ops.push_back(matmul);
    m.inputs = {first.inputs[0], first.inputs[1], -1};
    int x = first.outputs[0];
    // The elementwise steps, up to the Softmax.
    for (;;) {
      const int next = SoleReader(x);
      if (next < 0) return std::nullopt;
      const Op& op = graph_.op(next);
      if (!Standard(op)) return std::nullopt;
      if (op.op_type == "Softmax") {
        const int64_t rank = static_cast<int64_t>(scores.shape.size());
        int64_t axis = op.IntAttribute("axis", -1);
        if (axis < 0) axis += rank;
        if (axis != rank - 1 || op.outputs.size() != 1) return std::nullopt;
        m.fused_ops.push_back(next);
        x = op.outputs[0];
        break;
      }
      if (static_cast<int>(m.steps.size()) == kMaxSteps) return std::nullopt;
      std::optional<AttentionStep> step = Step(op, x, scores.shape);
      if (!step) return std::nullopt;
      step->first_input = static_cast<int>(m.inputs.size());
      for (size_t k = 0; k < op.inputs.size(); ++k) {
        if (static_cast<int>(k) != step->score_position) {
          m.inputs.push_back(op.inputs[k]);
        }
      }
      m.causal |= AppliesCausalMask(op, *step, scores.shape);
      m.steps.push_back(*step);
      m.fused_ops.push_back(next);
      x = op.outputs[0];
    }
    int next = SoleReader(x);
    if (next >= 0 && IsIdentityDropout(graph_.op(next))) {
      m.fused_ops.push_back(next);
      x = graph_.op(next).outputs[0];
      next = SoleReader(x);
    }
    if (next < 0) return std::nullopt;
    const Op& last = graph_.op(next);
    if (!Standard(last) || last.op_type != "MatMul" ||
        last.inputs.size() != 2 || last.inputs[0] != x ||
        last.inputs[1] == x || last.inputs[1] < 0 ||
        !graph_.tensor(last.outputs[0]).shape_known) {
      return std::nullopt;
    }
    m.inputs[2] = last.inputs[1];
    m.context_matmul = next;
    m.fused_ops.push_back(next);
    return m;
  }

 private:
  // The one op reading `tensor` (once), when it is not a graph output.
  int SoleReader(int tensor) const {
    const Tensor& t = graph_.tensor(tensor);
    if (t.is_graph_output || t.consumers.size() != 1) return -1;
    const Op& op = graph_.op(t.consumers[0]);
    int uses = 0;
    for (int in : op.inputs) uses += in == tensor;
    return uses == 1 ? t.consumers[0] : -1;
  }

  bool IsScalar(int tensor) const {
    if (tensor < 0) return false;
    const Tensor& t = graph_.tensor(tensor);
    return t.shape_known && t.num_elements() == 1 && IsFloatingPoint(t.dtype);
  }

  // A step on the scores `x` (of shape `shape`) keeping their shape.
  std::optional<AttentionStep> Step(const Op& op, int x,
                                    const std::vector<int64_t>& shape) const {
    if (op.outputs.size() != 1) return std::nullopt;
    const Tensor& out = graph_.tensor(op.outputs[0]);
    if (!out.shape_known || out.shape != shape) return std::nullopt;
    AttentionStep step;
    step.op_type = op.op_type;
    for (size_t k = 0; k < op.inputs.size(); ++k) {
      if (op.inputs[k] < 0) return std::nullopt;
      if (op.inputs[k] == x) step.score_position = static_cast<int>(k);
    }
    step.inputs = static_cast<int>(op.inputs.size()) - 1;
    if (op.op_type == "Mul" || op.op_type == "Div") {
      if (op.inputs.size() != 2) return std::nullopt;
      if (op.op_type == "Div" && step.score_position != 0) return std::nullopt;
      if (!IsScalar(op.inputs[1 - step.score_position])) {
        return std::nullopt;
      }
      return step;
    }
    if (op.op_type == "Add" && op.inputs.size() == 2) return step;
    if (op.op_type == "Where" && op.inputs.size() == 3 &&
        step.score_position > 0) {
      return step;
    }
    return std::nullopt;
  }

  // How a mask tensor says which scores it hides.
  enum class MaskForm {
    kAdditive,    // added to the scores: 0 kept, <= kHidden hidden
    kKeptTrue,    // a Where condition choosing the scores where true
    kHiddenTrue,  // a Where condition choosing the fill where true
  };

  // Whether the step `op` hides exactly the keys after each query of the
  // scores (of shape `shape`, square in its last two dims), as a causal
  // decoder's mask does:
  //  - Add of a mask that is 0 on and below the diagonal and <= kHidden
  //    above it;
  //  - Where(mask, scores, fill) with the mask true on and below the
  //    diagonal, or Where(mask, fill, scores) (torch's masked_fill) with
  //    it true above, and the fill a constant <= kHidden.
  // The mask is constant data of that pattern, or Trilu(upper=1, k=1) of a
  // ConstantOfShape (the hidden value, or true). Masks without their
  // values (--noweights' stripped constants) are not causal.
  bool AppliesCausalMask(const Op& op, const AttentionStep& step,
                         const std::vector<int64_t>& shape) const {
    const size_t rank = shape.size();
    if (rank < 2 || shape[rank - 1] != shape[rank - 2]) return false;
    const int64_t keys = shape[rank - 1];
    if (op.op_type == "Add") {
      return IsCausalMask(op.inputs[1 - step.score_position], keys,
                          MaskForm::kAdditive);
    }
    if (op.op_type == "Where" && op.inputs.size() == 3) {
      const int fill_position = step.score_position == 1 ? 2 : 1;
      std::optional<double> fill = ScalarValue(op.inputs[fill_position]);
      if (!fill || *fill > kHidden) return false;
      return IsCausalMask(op.inputs[0], keys,
                          step.score_position == 1 ? MaskForm::kKeptTrue
                                                   : MaskForm::kHiddenTrue);
    }
    return false;
  }

  // The value of a one-element constant (its data, or a Constant op's).
  std::optional<double> ScalarValue(int tensor) const {
    if (tensor < 0) return std::nullopt;
    const Tensor& t = graph_.tensor(tensor);
    if (t.data != nullptr) {
      if (!t.shape_known || t.num_elements() != 1) return std::nullopt;
      return Element(*t.data, 0);
    }
    if (t.producer < 0) return std::nullopt;
    const Op& op = graph_.op(t.producer);
    if (!Standard(op) || op.op_type != "Constant") return std::nullopt;
    if (const AttributeValue* a = op.FindAttribute("value_int")) {
      return static_cast<double>(a->i);
    }
    if (const AttributeValue* a = op.FindAttribute("value_float")) return a->f;
    if (const AttributeValue* a = op.FindAttribute("value")) {
      if (a->tensor != nullptr) return Element(*a->tensor, 0);
    }
    return std::nullopt;
  }

  // Whether `mask` is causal in `form` for `keys` keys; each mask is
  // examined once (a decoder's layers share one).
  bool IsCausalMask(int mask, int64_t keys, MaskForm form) const {
    const auto key = std::make_tuple(mask, keys, form);
    auto seen = causal_masks_.find(key);
    if (seen != causal_masks_.end()) return seen->second;
    const bool causal = ExamineMask(mask, keys, form);
    causal_masks_[key] = causal;
    return causal;
  }

  bool ExamineMask(int mask, int64_t keys, MaskForm form) const {
    if (mask < 0) return false;
    const Tensor& m = graph_.tensor(mask);
    if (!m.shape_known || m.shape.size() < 2 || m.shape.back() != keys ||
        m.shape[m.shape.size() - 2] != keys) {
      return false;
    }
    if (m.data != nullptr) return IsTriangular(*m.data, m, keys, form);
    if (m.producer < 0) return false;
    // A Cast keeps which entries are 0 (false) and which are not.
    const Op& producer = graph_.op(m.producer);
    if (form != MaskForm::kAdditive && Standard(producer) &&
        producer.op_type == "Cast" && producer.inputs.size() == 1) {
      return ExamineMask(producer.inputs[0], keys, form);
    }
    // Trilu(upper=1, k=1) of one value: the value above the diagonal, 0
    // (false) on and below it.
    const Op& trilu = producer;
    if (!Standard(trilu) || trilu.op_type != "Trilu" ||
        trilu.IntAttribute("upper", 1) != 1 || trilu.inputs.size() != 2 ||
        form == MaskForm::kKeptTrue) {
      return false;
    }
    std::optional<double> k = ScalarValue(trilu.inputs[1]);
    if (!k || *k != 1) return false;
    std::optional<double> v = UniformValue(trilu.inputs[0]);
    return v && (form == MaskForm::kAdditive ? *v <= kHidden : *v != 0);
  }

  // The value of every element of a tensor that holds one value: a
  // ConstantOfShape's, or constant data's (a Constant op's or the
  // tensor's own) whose elements are all equal.
  std::optional<double> UniformValue(int tensor) const {
    if (tensor < 0) return std::nullopt;
    const Tensor& t = graph_.tensor(tensor);
    const TensorData* data = t.data.get();
    if (data == nullptr && t.producer >= 0) {
      const Op& op = graph_.op(t.producer);
      if (!Standard(op)) return std::nullopt;
      const AttributeValue* value = op.FindAttribute("value");
      if (value == nullptr || value->tensor == nullptr) return std::nullopt;
      if (op.op_type == "ConstantOfShape") return Element(*value->tensor, 0);
      if (op.op_type == "Constant") data = value->tensor.get();
    }
    if (data == nullptr || !t.shape_known) return std::nullopt;
    std::optional<double> first = Element(*data, 0);
    for (int64_t i = 1; first && i < t.num_elements(); ++i) {
      if (Element(*data, i) != first) return std::nullopt;
    }
    return first;
  }

  // Constant data [1, ..., 1, keys, keys] whose entry (i, j) hides the
  // score exactly where j > i, in the mask's form.
  static bool IsTriangular(const TensorData& data, const Tensor& t,
                           int64_t keys, MaskForm form) {
    if (t.num_elements() != keys * keys) return false;
    for (int64_t i = 0; i < keys; ++i) {
      for (int64_t j = 0; j < keys; ++j) {
        std::optional<double> v = Element(data, i * keys + j);
        if (!v) return false;
        const bool hidden = j > i;
        bool ok = false;
        switch (form) {
          case MaskForm::kAdditive:
            ok = hidden ? *v <= kHidden : *v == 0;
            break;
          case MaskForm::kKeptTrue:
            ok = (*v != 0) != hidden;
            break;
          case MaskForm::kHiddenTrue:
            ok = (*v != 0) == hidden;
            break;
        }
        if (!ok) return false;
      }
    }
    return true;
  }

  // Dropout that passes its input through: no training_mode input or a
  // constant false one, and no reader of its mask.
  bool IsIdentityDropout(const Op& op) const {
    if (!Standard(op) || op.op_type != "Dropout") return false;
    if (op.outputs.size() > 1 && op.outputs[1] >= 0 &&
        (!graph_.tensor(op.outputs[1]).consumers.empty() ||
         graph_.tensor(op.outputs[1]).is_graph_output)) {
      return false;
    }
    if (op.inputs.size() < 3 || op.inputs[2] < 0) return true;
    const Tensor& mode = graph_.tensor(op.inputs[2]);
    return mode.data != nullptr && mode.dtype == DataType::kBool &&
           mode.data->raw.size() == 1 && mode.data->raw[0] == 0;
  }

  const Graph& graph_;
  mutable std::map<std::tuple<int, int64_t, MaskForm>, bool> causal_masks_;
};

}  // namespace

absl::StatusOr<Graph> FuseAttention(const Graph& graph, int* fused) {
  const int n = static_cast<int>(graph.ops().size());
  std::vector<std::optional<Match>> match_at(n);
  std::vector<char> in_match(n, 0);
  int count = 0;
  const Matcher matcher(graph);
  for (int op : graph.topological_order()) {
    if (in_match[op]) continue;
    std::optional<Match> m = matcher.At(op);
    if (!m) continue;
    bool overlaps = false;
    for (int o : m->fused_ops) overlaps |= in_match[o] != 0;
    if (overlaps) continue;
    for (int o : m->fused_ops) in_match[o] = 1;
    match_at[m->context_matmul] = std::move(m);
    ++count;
  }
  if (fused != nullptr) *fused = count;
  if (count == 0) return graph;

  const std::vector<Tensor>& tensors = graph.tensors();
  GraphBuilder builder(graph.name(), graph.name());
  for (const Tensor& t : tensors) {
    if (t.kind != TensorKind::kActivation) builder.AddSourceTensor(t.name, t.kind);
  }
  auto name_of = [&](int t) { return t < 0 ? std::string() : tensors[t].name; };
  // Ops in graph order; a core where its last MatMul was.
  for (int i = 0; i < n; ++i) {
    const Op& op = graph.op(i);
    if (match_at[i]) {
      const Match& m = *match_at[i];
      std::vector<std::string> inputs;
      for (int t : m.inputs) inputs.push_back(name_of(t));
      Op& f = builder.AddOp(
          absl::StrCat(graph.op(m.scores_matmul).key, "/FusedAttention"),
          kFusedAttentionType, kPlacerDomain, inputs, {name_of(op.outputs[0])});
      AttributeValue steps, positions, counts;
      steps.kind = AttributeValue::Kind::kStrings;
      positions.kind = counts.kind = AttributeValue::Kind::kInts;
      for (const AttentionStep& s : m.steps) {
        steps.strings.push_back(s.op_type);
        positions.ints.push_back(s.score_position);
        counts.ints.push_back(s.inputs);
      }
      f.attributes["steps"] = steps;
      f.attributes["score_positions"] = positions;
      f.attributes["step_inputs"] = counts;
      if (m.causal) {
        AttributeValue causal;
        causal.kind = AttributeValue::Kind::kInt;
        causal.i = 1;
        f.attributes["causal"] = causal;
      }
      continue;
    }
    if (in_match[i]) continue;
    builder.AddCopyOf(graph, op);
  }
  for (int out : graph.outputs()) builder.MarkOutput(tensors[out].name);
  ASSIGN_OR_RETURN(Graph result, std::move(builder).Build());
  CopyTensorFacts(graph, result);
  result.set_folded_op_keys(graph.folded_op_keys());
  const std::vector<Tensor>& copied = result.tensors();
  for (Op& op : result.mutable_ops()) {
    if (IsFusedAttention(op)) {
      op.forward = ComputeForwardCost(op, copied);
    }
  }
  return result;
}

}  // namespace placer
