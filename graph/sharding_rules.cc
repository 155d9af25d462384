#include "graph/sharding_rules.h"

#include <algorithm>
#include <string>

#include "absl/container/flat_hash_set.h"
#include "graph/fused_attention.h"
#include "graph/fused_region.h"

namespace placer {
namespace {

using Kind = TensorLayout::Kind;

const std::vector<int64_t>& Shape(const Graph& graph, int t) {
  return graph.tensor(t).shape;
}
bool Known(const Graph& graph, int t) {
  return t >= 0 && graph.tensor(t).shape_known;
}
int Rank(const Graph& graph, int t) {
  return static_cast<int>(graph.tensor(t).shape.size());
}
int64_t Bytes(const Graph& graph, int t) {
  return std::max<int64_t>(0, graph.tensor(t).bytes());
}

const absl::flat_hash_set<std::string>& ElementwiseOps() {
  static const auto* ops = new absl::flat_hash_set<std::string>{
      "Add",         "Sub",      "Mul",         "Div",       "Pow",
      "Where",       "Relu",     "Gelu",        "Tanh",      "Sigmoid",
      "Erf",         "Sqrt",     "Neg",         "Exp",       "Log",
      "Cast",        "Dropout",  "Identity",    "Abs",       "Reciprocal",
      "LeakyRelu",   "Clip",     "Equal",       "Less",      "Greater",
      "Not",         "And",      "Or",          "Max",       "Min",
      "Sum",         "Softplus", "HardSigmoid", "HardSwish", "Mish",
      "Sin",         "Cos",      "Softsign",    "Elu",       "Selu",
      "Celu",        "PRelu",    "Mod",         "Floor",     "Ceil",
      "Round",       "Sign",     "IsNaN",       "Expand",    "GreaterOrEqual",
      "LessOrEqual", "Xor",      "BitShift",    "Trilu"};
  return *ops;
}

int ReshapedDim(const Graph& graph_, int in, int out, int e, int t) {
  if (!Known(graph_, in) || !Known(graph_, out) || e >= Rank(graph_, out))
    return -1;
  const std::vector<int64_t>& a = Shape(graph_, in);
  const std::vector<int64_t>& b = Shape(graph_, out);
  if (b[e] % t != 0 || b[e] < t) return -1;
  int64_t prefix_out = 1;
  for (int i = 0; i < e; ++i) prefix_out *= b[i];
  int64_t prefix_in = 1;
  for (int d = 0; d < static_cast<int>(a.size()); ++d) {
    if (prefix_in == prefix_out && a[d] % t == 0 && a[d] >= t) return d;
    prefix_in *= a[d];
  }
  return -1;
}

std::optional<OpRule> ElementwiseRule(const Graph& graph_, const Op& op,
                                      int dim, int t) {
  OpRule rule;
  const int out = op.outputs[0];
  if (!Known(graph_, out) || dim >= Rank(graph_, out) ||
      Shape(graph_, out)[dim] % t != 0) {
    return std::nullopt;
  }
  const bool expand = op.op_type == "Expand";
  for (size_t i = 0; i < op.inputs.size(); ++i) {
    const int x = op.inputs[i];
    InputNeed need;
    if (x < 0 || (expand && i > 0) || (op.op_type == "Dropout" && i > 0)) {
      rule.inputs.push_back(need);
      continue;
    }
    if (!Known(graph_, x)) return std::nullopt;
    const int aligned = dim - (Rank(graph_, out) - Rank(graph_, x));
    if (aligned < 0 || Shape(graph_, x)[aligned] == 1) {
      need.gradient_partial = true;  // broadcast along the split dim
    } else if (Shape(graph_, x)[aligned] == Shape(graph_, out)[dim]) {
      need.layout = TensorLayout::Split(aligned);
    } else {
      return std::nullopt;
    }
    rule.inputs.push_back(need);
  }
  for (int o : op.outputs) {
    if (o < 0) {
      rule.outputs.push_back(TensorLayout::Replicated());
      continue;
    }
    if (!Known(graph_, o) || Rank(graph_, o) != Rank(graph_, out) ||
        Shape(graph_, o)[dim] != Shape(graph_, out)[dim]) {
      return std::nullopt;
    }
    rule.outputs.push_back(TensorLayout::Split(dim));
  }
  return rule;
}

}  // namespace

namespace {

// A FusedElementwise op split on its first output's dim: the layouts its
// body's ops need, from that output back to the op's inputs, each body op
// by its own rule; none when two of its readers want a tensor in different
// layouts or an op has no rule for what is wanted of it.
std::optional<OpRule> RegionRule(const Op& op, const Graph& body,
                                 const OpSharding& mode, int t) {
  OpRule rule;
  rule.inputs.resize(op.inputs.size());
  rule.outputs.assign(op.outputs.size(), TensorLayout::Replicated());
  if (!mode.split()) return rule;
  if (mode.kind != OpSharding::Kind::kSplitOutput || body.outputs().empty()) {
    return std::nullopt;
  }
  const int tensors = static_cast<int>(body.tensors().size());
  std::vector<std::optional<TensorLayout>> want(tensors);
  std::vector<char> partial(tensors, 0);
  // Its outputs of the first one's shape split alike.
  for (int out : body.outputs()) {
    if (body.tensor(out).shape == body.tensor(body.outputs()[0]).shape) {
      want[out] = TensorLayout::Split(mode.dim);
    }
  }
  const std::vector<int>& order = body.topological_order();
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    const Op& member = body.op(*it);
    int wanted = -1;
    for (size_t k = 0; k < member.outputs.size(); ++k) {
      const int out = member.outputs[k];
      if (out >= 0 && want[out]) {
        wanted = static_cast<int>(k);
        break;
      }
    }
    if (wanted < 0) {
      for (int out : member.outputs) {
        if (out >= 0 && body.tensor(out).is_graph_output) return std::nullopt;
      }
      continue;  // read by no op of the body
    }
    const TensorLayout layout = *want[member.outputs[wanted]];
    const OpSharding member_mode =
        layout.kind == Kind::kSplit ? OpSharding::SplitOutput(layout.dim)
                                    : OpSharding::Replicated();
    if (layout.kind == Kind::kPartial) return std::nullopt;
    std::optional<OpRule> inner = ShardingRule(body, *it, member_mode, t);
    if (!inner) return std::nullopt;
    for (size_t k = 0; k < member.outputs.size(); ++k) {
      const int out = member.outputs[k];
      if (out >= 0 && want[out] && *want[out] != inner->outputs[k]) {
        return std::nullopt;
      }
    }
    rule.internal_allreduce_bytes += inner->internal_allreduce_bytes;
    for (size_t i = 0; i < member.inputs.size(); ++i) {
      const int x = member.inputs[i];
      const InputNeed& need = inner->inputs[i];
      if (x < 0 || need.any) continue;
      if (want[x] && *want[x] != need.layout) return std::nullopt;
      want[x] = need.layout;
      partial[x] |= need.gradient_partial;
    }
  }
  for (size_t k = 0; k < op.inputs.size(); ++k) {
    if (op.inputs[k] < 0) continue;
    if (!want[k]) {
      rule.inputs[k].any = true;
      continue;
    }
    rule.inputs[k].layout = *want[k];
    rule.inputs[k].gradient_partial = partial[k] != 0;
  }
  for (size_t j = 0; j < op.outputs.size(); ++j) {
    const int out = body.outputs()[j];
    if (op.outputs[j] < 0) continue;
    if (!want[out]) return std::nullopt;
    rule.outputs[j] = *want[out];
  }
  return rule;
}

}  // namespace

std::optional<OpRule> ShardingRule(const Graph& graph_, int index,
                                   const OpSharding& mode, int t) {
  const Op& op = graph_.op(index);
  if (const Graph* body = RegionBody(op); body != nullptr) {
    return RegionRule(op, *body, mode, t);
  }
  const std::string& type = op.op_type;
  OpRule rule;
  rule.inputs.resize(op.inputs.size());
  rule.outputs.assign(op.outputs.size(), TensorLayout::Replicated());
  if (type == "Shape" || type == "Size") {
    if (mode.split()) return std::nullopt;
    for (InputNeed& need : rule.inputs) need.any = true;
    return rule;
  }
  if (!mode.split()) return rule;
  if (t < 2 || op.outputs.empty() || !Known(graph_, op.outputs[0])) {
    return std::nullopt;
  }
  const int out = op.outputs[0];
  const int r = Rank(graph_, out);
  const int d = mode.dim;
  const bool contracted = mode.kind == OpSharding::Kind::kContracted;
  if (!contracted && (d < 0 || d >= r || Shape(graph_, out)[d] % t != 0)) {
    return std::nullopt;
  }
  auto input = [&](int i) {
    return i < static_cast<int>(op.inputs.size()) ? op.inputs[i] : -1;
  };
  auto divisible = [&](int x, int dim) {
    return Known(graph_, x) && dim >= 0 && dim < Rank(graph_, x) &&
           Shape(graph_, x)[dim] % t == 0 && Shape(graph_, x)[dim] >= t;
  };
  auto split = [&](int i, int dim) -> bool {
    if (!divisible(input(i), dim)) return false;
    rule.inputs[i].layout = TensorLayout::Split(dim);
    return true;
  };
  auto whole = [&](int i) { rule.inputs[i].gradient_partial = true; };
  if (ElementwiseOps().count(type) > 0) {
    if (contracted) return std::nullopt;
    return ElementwiseRule(graph_, op, d, t);
  }
  if (type == "MatMul") {
    const int a = input(0), b = input(1);
    if (!Known(graph_, a) || !Known(graph_, b) || Rank(graph_, a) < 2 ||
        Rank(graph_, b) < 2) {
      return std::nullopt;
    }
    const int ra = Rank(graph_, a), rb = Rank(graph_, b);
    if (contracted) {
      if (!split(0, ra - 1) || !split(1, rb - 2)) return std::nullopt;
      rule.outputs[0] = TensorLayout::Partial();
      return rule;
    }
    rule.outputs[0] = TensorLayout::Split(d);
    if (d == r - 1) {
      whole(0);
      if (!split(1, rb - 1)) return std::nullopt;
    } else if (d == r - 2) {
      if (!split(0, ra - 2)) return std::nullopt;
      whole(1);
    } else {
      for (int i = 0; i < 2; ++i) {
        const int x = input(i);
        const int aligned = d - (r - Rank(graph_, x));
        if (aligned < 0 || Shape(graph_, x)[aligned] == 1) {
          whole(i);
        } else if (!split(i, aligned)) {
          return std::nullopt;
        }
      }
    }
    return rule;
  }
  if (IsFusedAttention(op)) {
    // Split on a batch or head dim (every input with it, the rest
    // broadcast), or on the query rows (Q and the steps' inputs that have
    // them; Kᵀ and V whole, their gradients partial).
    if (contracted || d >= r - 1) return std::nullopt;
    for (int i = 0; i < static_cast<int>(op.inputs.size()); ++i) {
      const int x = input(i);
      if (x < 0) continue;
      if (!Known(graph_, x)) return std::nullopt;
      const int aligned = d - (r - Rank(graph_, x));
      if ((d == r - 2 && (i == 1 || i == 2)) || aligned < 0 ||
          Shape(graph_, x)[aligned] == 1) {
        whole(i);
      } else if (!split(i, aligned)) {
        return std::nullopt;
      }
    }
    rule.outputs[0] = TensorLayout::Split(d);
    return rule;
  }
  if (type == "Gemm") {
    const bool ta = op.IntAttribute("transA", 0) != 0;
    const bool tb = op.IntAttribute("transB", 0) != 0;
    if (contracted) {
      if (!split(0, ta ? 0 : 1) || !split(1, tb ? 1 : 0)) return std::nullopt;
      if (input(2) >= 0) whole(2);
      rule.outputs[0] = TensorLayout::Partial();
      return rule;
    }
    if (d == 1) {
      whole(0);
      if (!split(1, tb ? 0 : 1)) return std::nullopt;
    } else {
      if (!split(0, ta ? 1 : 0)) return std::nullopt;
      whole(1);
    }
    const int c = input(2);
    if (c >= 0) {
      const int aligned = d - (2 - Rank(graph_, c));
      if (aligned < 0 || Shape(graph_, c)[aligned] == 1) {
        whole(2);
      } else if (!split(2, aligned)) {
        return std::nullopt;
      }
    }
    rule.outputs[0] = TensorLayout::Split(d);
    return rule;
  }
  if (type == "Conv") {
    const int64_t groups = op.IntAttribute("group", 1);
    const int x = input(0);
    if (!Known(graph_, x) || Rank(graph_, x) < 3) return std::nullopt;
    const bool depthwise = groups > 1 && groups == Shape(graph_, x)[1] &&
                           groups == Shape(graph_, out)[1];
    if (groups > 1 && !depthwise) return std::nullopt;
    if (contracted) {
      if (depthwise || !split(0, 1) || !split(1, 1)) return std::nullopt;
      if (input(2) >= 0) whole(2);
      rule.outputs[0] = TensorLayout::Partial();
      return rule;
    }
    if (d == 1) {
      if (depthwise) {
        if (!split(0, 1)) return std::nullopt;
      } else {
        whole(0);
      }
      if (!split(1, 0) || (input(2) >= 0 && !split(2, 0))) return std::nullopt;
    } else if (d == 0) {
      if (!split(0, 0)) return std::nullopt;
      whole(1);
      if (input(2) >= 0) whole(2);
    } else {
      return std::nullopt;
    }
    rule.outputs[0] = TensorLayout::Split(d);
    return rule;
  }
  if (type == "BatchNormalization" || type == "InstanceNormalization") {
    if (contracted || d != 1 || !split(0, 1)) return std::nullopt;
    for (size_t i = 1; i < op.inputs.size(); ++i) {
      if (input(i) >= 0 && !split(static_cast<int>(i), 0)) return std::nullopt;
    }
    rule.outputs[0] = TensorLayout::Split(1);
    for (size_t o = 1; o < op.outputs.size(); ++o) {
      if (op.outputs[o] >= 0) rule.outputs[o] = TensorLayout::Split(0);
    }
    return rule;
  }
  if (type == "MaxPool" || type == "AveragePool" || type == "LpPool" ||
      type == "GlobalAveragePool" || type == "GlobalMaxPool") {
    // Each image and channel by itself.
    if (contracted || d > 1 || !split(0, d)) return std::nullopt;
    for (size_t o = 0; o < op.outputs.size(); ++o) {
      if (op.outputs[o] >= 0) rule.outputs[o] = TensorLayout::Split(d);
    }
    return rule;
  }
  if (type == "LayerNormalization") {
    int64_t axis = op.IntAttribute("axis", -1);
    if (axis < 0) axis += r;
    if (contracted || d >= axis || !split(0, d)) return std::nullopt;
    for (size_t i = 1; i < op.inputs.size(); ++i) {
      if (input(i) >= 0) whole(static_cast<int>(i));
    }
    for (size_t o = 0; o < op.outputs.size(); ++o) {
      if (op.outputs[o] >= 0) rule.outputs[o] = TensorLayout::Split(d);
    }
    return rule;
  }
  if (type == "Softmax" || type == "LogSoftmax") {
    int64_t axis = op.IntAttribute("axis", -1);
    if (axis < 0) axis += r;
    if (contracted || !split(0, d)) return std::nullopt;
    if (d == axis)
      rule.internal_allreduce_bytes =
          Bytes(graph_, out) / Shape(graph_, out)[d];
    rule.outputs[0] = TensorLayout::Split(d);
    return rule;
  }
  if (type == "SoftmaxCrossEntropyLoss" ||
      type == "NegativeLogLikelihoodLoss") {
    const int scores = input(0);
    if (!contracted || !split(0, 1)) return std::nullopt;
    if (type == "SoftmaxCrossEntropyLoss") {
      rule.internal_allreduce_bytes =
          Bytes(graph_, scores) / Shape(graph_, scores)[1];
    }
    rule.outputs[0] = TensorLayout::Partial();
    if (op.outputs.size() > 1 && op.outputs[1] >= 0) {
      rule.outputs[1] = TensorLayout::Split(1);
    }
    return rule;
  }
  if (type == "Reshape" || type == "Squeeze" || type == "Unsqueeze" ||
      type == "Flatten") {
    if (contracted) return std::nullopt;
    const int from = ReshapedDim(graph_, input(0), out, d, t);
    if (from < 0 || !split(0, from)) return std::nullopt;
    rule.outputs[0] = TensorLayout::Split(d);
    return rule;
  }
  if (type == "Transpose") {
    if (contracted) return std::nullopt;
    std::vector<int64_t> perm = op.IntsAttribute("perm");
    if (perm.empty()) {
      for (int i = r - 1; i >= 0; --i) perm.push_back(i);
    }
    if (static_cast<int>(perm.size()) != r ||
        !split(0, static_cast<int>(perm[d]))) {
      return std::nullopt;
    }
    rule.outputs[0] = TensorLayout::Split(d);
    return rule;
  }
  if (type == "Split") {
    int64_t axis = op.IntAttribute("axis", 0);
    if (axis < 0) axis += r;
    if (contracted || !split(0, d)) return std::nullopt;
    for (size_t o = 0; o < op.outputs.size(); ++o) {
      const int part = op.outputs[o];
      if (part < 0) continue;
      if (!divisible(part, d)) return std::nullopt;
      rule.outputs[o] = TensorLayout::Split(d);
    }
    return rule;
  }
  if (type == "Concat") {
    int64_t axis = op.IntAttribute("axis", 0);
    if (axis < 0) axis += r;
    if (contracted || d == axis) return std::nullopt;
    for (size_t i = 0; i < op.inputs.size(); ++i) {
      if (!split(static_cast<int>(i), d)) return std::nullopt;
    }
    rule.outputs[0] = TensorLayout::Split(d);
    return rule;
  }
  if (type == "Slice") {
    const int x = input(0);
    if (contracted || !Known(graph_, x) || Rank(graph_, x) != r ||
        Shape(graph_, x)[d] != Shape(graph_, out)[d] || !split(0, d)) {
      return std::nullopt;
    }
    rule.outputs[0] = TensorLayout::Split(d);
    return rule;
  }
  if (type == "Gather") {
    const int data = input(0), indices = input(1);
    if (!Known(graph_, data) || !Known(graph_, indices)) return std::nullopt;
    int64_t axis = op.IntAttribute("axis", 0);
    if (axis < 0) axis += Rank(graph_, data);
    if (contracted) {
      if (!split(0, static_cast<int>(axis))) return std::nullopt;
      rule.outputs[0] = TensorLayout::Partial();
      return rule;
    }
    const int ri = Rank(graph_, indices);
    if (d < axis) {
      if (!split(0, d)) return std::nullopt;
    } else if (d < axis + ri) {
      whole(0);
      if (!split(1, static_cast<int>(d - axis))) return std::nullopt;
    } else {
      if (!split(0, static_cast<int>(d - ri + 1))) return std::nullopt;
    }
    rule.outputs[0] = TensorLayout::Split(d);
    return rule;
  }
  if (type == "ReduceMean" || type == "ReduceSum" || type == "ReduceMax" ||
      type == "ReduceMin" || type == "ReduceL2" || type == "ReduceProd") {
    const int x = input(0);
    if (!Known(graph_, x) || contracted) return std::nullopt;
    std::vector<int64_t> axes = op.IntsAttribute("axes");
    if (axes.empty() && input(1) >= 0) {
      const Tensor& a = graph_.tensor(input(1));
      if (!a.data || a.data->raw.size() % 8 != 0) return std::nullopt;
      axes.resize(a.data->raw.size() / 8);
      std::copy(a.data->raw.data(), a.data->raw.data() + a.data->raw.size(),
                reinterpret_cast<char*>(axes.data()));
    }
    if (axes.empty()) return std::nullopt;  // every axis
    for (int64_t& a : axes) {
      if (a < 0) a += Rank(graph_, x);
    }
    const bool keep = op.IntAttribute("keepdims", 1) != 0;
    int from = -1;
    for (int i = 0, o = 0; i < Rank(graph_, x); ++i) {
      const bool reduced = std::count(axes.begin(), axes.end(), i) > 0;
      if (reduced && !keep) continue;
      if (o == d) {
        from = reduced ? -1 : i;
        break;
      }
      ++o;
    }
    if (from < 0 || !split(0, from)) return std::nullopt;
    rule.outputs[0] = TensorLayout::Split(d);
    return rule;
  }
  return std::nullopt;
}

}  // namespace placer
