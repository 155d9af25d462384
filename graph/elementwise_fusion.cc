#include "graph/elementwise_fusion.h"

#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "base/status_helpers.h"
#include "graph/op_costs.h"
#include "graph/repeated_layers.h"

namespace placer {
namespace {

const absl::flat_hash_set<std::string>& FusibleTypes() {
  static const auto* types = new absl::flat_hash_set<std::string>{
      // Elementwise arithmetic, activations, selections and casts.
      "Add", "Sub", "Mul", "Div", "Pow", "Neg", "Abs", "Reciprocal", "Sqrt",
      "Exp", "Log", "Erf", "Sin", "Cos", "Tanh", "Sigmoid", "Relu",
      "LeakyRelu", "Gelu", "HardSigmoid", "HardSwish", "Clip",
      "Max", "Min", "Where", "Cast", "Equal", "Less", "Greater", "Not",
      // Reductions along rows and the normalizations built of them.
      "ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "Softmax",
      "LogSoftmax", "LayerNormalization",
      // Data movement.
      "Reshape", "Transpose", "Squeeze", "Unsqueeze", "Flatten", "Expand",
      "Slice", "Split", "Concat", "Identity"};
  return *types;
}

// The regions as they grow: a partition of the fusible ops, kept such that
// contracting every region to one op leaves the graph acyclic.
class Regions {
 public:
  // `gradient[i]`: whether op i reads a tensor computed from parameters;
  // `layer[i]`: op i's repeated layer, -1 for none.
  Regions(const Graph& graph, std::vector<char> gradient,
          std::vector<int> layer)
      : graph_(graph),
        gradient_(std::move(gradient)),
        layer_(std::move(layer)),
        region_of_(graph.ops().size(), -1),
        mark_(graph.ops().size(), 0),
        seen_(graph.ops().size(), 0) {}

  // Puts op `op` in a region: with the regions of the ops it reads from,
  // one at a time in input order, while the contracted graph stays acyclic.
  void Grow(int op) {
    std::vector<int> members = {op};
    for (int in : graph_.op(op).inputs) {
      if (in < 0) continue;
      const int producer = graph_.tensor(in).producer;
      if (producer < 0 || region_of_[producer] < 0) continue;
      // A region computed from parameters and one that is not (a rotary
      // table) stay apart: the second runs once, and gets no gradient.
      if (gradient_[producer] != gradient_[op]) continue;
      // Kernels are compiled block by block (torch.compile per
      // TransformerBlock, Transformer Engine's layers): none spans two.
      if (layer_[producer] != layer_[op]) continue;
      const int r = region_of_[producer];
      if (std::find(joined_.begin(), joined_.end(), r) != joined_.end()) {
        continue;
      }
      std::vector<int> trial = members;
      trial.insert(trial.end(), members_[r].begin(), members_[r].end());
      if (!Acyclic(trial)) continue;
      members = std::move(trial);
      joined_.push_back(r);
    }
    const int region = static_cast<int>(members_.size());
    for (int r : joined_) members_[r].clear();
    joined_.clear();
    for (int m : members) region_of_[m] = region;
    std::sort(members.begin(), members.end());
    members_.push_back(std::move(members));
  }

  // Regions of two or more ops, each's members in ascending index.
  std::vector<std::vector<int>> Fused() const {
    std::vector<std::vector<int>> out;
    for (const std::vector<int>& m : members_) {
      if (m.size() >= 2) out.push_back(m);
    }
    return out;
  }

 private:
  // Whether no path leaves `members` and comes back into it, walking the
  // graph with every other region contracted to one node.
  bool Acyclic(const std::vector<int>& members) {
    ++stamp_;
    for (int m : members) mark_[m] = stamp_;
    std::vector<int> stack;
    auto push_consumers = [&](int x) {
      for (int out : graph_.op(x).outputs) {
        if (out < 0) continue;
        for (int c : graph_.tensor(out).consumers) {
          if (mark_[c] == stamp_ || seen_[c] == stamp_) continue;
          seen_[c] = stamp_;
          stack.push_back(c);
        }
      }
    };
    for (int m : members) push_consumers(m);
    while (!stack.empty()) {
      const int x = stack.back();
      stack.pop_back();
      const int r = region_of_[x];
      if (r < 0 || std::find(joined_.begin(), joined_.end(), r) !=
                       joined_.end()) {
        if (!Expand(x, push_consumers)) return false;
        continue;
      }
      for (int y : members_[r]) {
        seen_[y] = stamp_;
        if (!Expand(y, push_consumers)) return false;
      }
    }
    return true;
  }

  // Pushes x's consumers; false when one is in the trial region.
  template <typename Push>
  bool Expand(int x, Push& push_consumers) {
    for (int out : graph_.op(x).outputs) {
      if (out < 0) continue;
      for (int c : graph_.tensor(out).consumers) {
        if (mark_[c] == stamp_) return false;
      }
    }
    push_consumers(x);
    return true;
  }

  const Graph& graph_;
  std::vector<char> gradient_;
  std::vector<int> layer_;
  std::vector<int> region_of_;
  std::vector<std::vector<int>> members_;
  std::vector<int> joined_;  // regions merged into the one growing
  std::vector<int> mark_, seen_;
  int stamp_ = 0;
};

}  // namespace

bool IsFusible(const Graph& graph, int index) {
  const Op& op = graph.op(index);
  if (op.domain != "" && op.domain != "ai.onnx") return false;
  if (FusibleTypes().count(op.op_type) == 0) return false;
  if (op.forward.status == CostStatus::kUnknown) return false;
  for (int out : op.outputs) {
    if (out >= 0 && !graph.tensor(out).shape_known) return false;
  }
  return true;
}

absl::StatusOr<Graph> FuseElementwise(const Graph& graph, int* fused) {
  std::vector<char> from_parameters(graph.tensors().size(), 0);
  std::vector<char> gradient(graph.ops().size(), 0);
  for (size_t t = 0; t < graph.tensors().size(); ++t) {
    from_parameters[t] = graph.tensor(t).kind == TensorKind::kParameter;
  }
  for (int op : graph.topological_order()) {
    for (int in : graph.op(op).inputs) {
      gradient[op] |= in >= 0 && from_parameters[in];
    }
    for (int out : graph.op(op).outputs) {
      if (out >= 0) from_parameters[out] = gradient[op];
    }
  }
  Regions regions(graph, std::move(gradient),
                  FindRepeatedLayers(graph).layer_of_op);
  for (int op : graph.topological_order()) {
    if (IsFusible(graph, op)) regions.Grow(op);
  }
  const std::vector<std::vector<int>> made = regions.Fused();
  if (fused != nullptr) *fused = static_cast<int>(made.size());
  if (made.empty()) return graph;

  const int n = static_cast<int>(graph.ops().size());
  const std::vector<Tensor>& tensors = graph.tensors();
  std::vector<int> region_of(n, -1), last_of(made.size(), -1);
  for (size_t r = 0; r < made.size(); ++r) {
    for (int m : made[r]) region_of[m] = static_cast<int>(r);
    last_of[r] = made[r].back();
  }
  std::vector<int> position(n);
  for (int k = 0; k < n; ++k) position[graph.topological_order()[k]] = k;

  GraphBuilder builder(graph.name(), graph.name());
  for (const Tensor& t : tensors) {
    if (t.kind != TensorKind::kActivation) builder.AddSourceTensor(t.name, t.kind);
  }
  auto name_of = [&](int t) { return t < 0 ? std::string() : tensors[t].name; };
  for (int i = 0; i < n; ++i) {
    const int r = region_of[i];
    if (r < 0) {
      builder.AddCopyOf(graph, graph.op(i));
      continue;
    }
    if (i != last_of[r]) continue;
    // The region, its members in topological order.
    std::vector<int> members = made[r];
    std::sort(members.begin(), members.end(),
              [&](int a, int b) { return position[a] < position[b]; });
    std::vector<int> inputs, outputs;
    for (int m : members) {
      for (int t : graph.op(m).inputs) {
        if (t < 0) continue;
        const int producer = tensors[t].producer;
        if (producer >= 0 && region_of[producer] == r) continue;
        if (std::find(inputs.begin(), inputs.end(), t) == inputs.end()) {
          inputs.push_back(t);
        }
      }
    }
    for (int m : members) {
      for (int t : graph.op(m).outputs) {
        if (t < 0) continue;
        bool read_outside = tensors[t].is_graph_output;
        for (int c : tensors[t].consumers) read_outside |= region_of[c] != r;
        if (read_outside) outputs.push_back(t);
      }
    }
    const std::string key =
        absl::StrCat(graph.op(members[0]).key, "/", kFusedRegionType);
    GraphBuilder body_builder(graph.name(), key);
    for (int t : inputs) {
      body_builder.AddSourceTensor(tensors[t].name,
                                   tensors[t].kind == TensorKind::kActivation
                                       ? TensorKind::kGraphInput
                                       : tensors[t].kind);
    }
    for (int m : members) body_builder.AddCopyOf(graph, graph.op(m));
    for (int t : outputs) body_builder.MarkOutput(tensors[t].name);
    ASSIGN_OR_RETURN(Graph body, std::move(body_builder).Build());
    CopyTensorFacts(graph, body);
    std::vector<std::string> input_names, output_names;
    for (int t : inputs) input_names.push_back(name_of(t));
    for (int t : outputs) output_names.push_back(name_of(t));
    Op& f = builder.AddOp(key, kFusedRegionType, kPlacerDomain, input_names,
                          output_names);
    AttributeValue attribute;
    attribute.kind = AttributeValue::Kind::kGraph;
    attribute.graph = std::make_shared<const Graph>(std::move(body));
    f.attributes["body"] = std::move(attribute);
  }
  for (int out : graph.outputs()) builder.MarkOutput(tensors[out].name);
  ASSIGN_OR_RETURN(Graph result, std::move(builder).Build());
  CopyTensorFacts(graph, result);
  result.set_folded_op_keys(graph.folded_op_keys());
  for (Op& op : result.mutable_ops()) {
    if (IsFusedRegion(op)) op.forward = ComputeForwardCost(op, result.tensors());
  }
  return result;
}

}  // namespace placer
