#include "graph/training_view.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "graph/fused_attention.h"
#include "graph/op_costs.h"
#include "graph/saved_for_backward.h"

namespace placer {
namespace {

ValueKind KindOf(TensorKind kind) {
  switch (kind) {
    case TensorKind::kActivation: return ValueKind::kActivation;
    case TensorKind::kGraphInput: return ValueKind::kGraphInput;
    case TensorKind::kParameter: return ValueKind::kParameter;
    case TensorKind::kConstant: return ValueKind::kConstant;
  }
  return ValueKind::kConstant;
}

void AddUnique(std::vector<int>& list, int x) {
  if (std::find(list.begin(), list.end(), x) == list.end()) list.push_back(x);
}

// Per op: the lower-precision copies of initializers (weights, constants)
// that its backward keeps. As torch.autocast's cast cache makes one copy
// per weight per forward pass, a weight is charged once, to the first op
// (in topological order) with a backward that saves it: that op's backward
// runs last among the weight's readers, so the copy is counted for as long
// as any of them keeps it.
std::vector<int64_t> CastCopyBytes(const Graph& graph,
                                   const std::vector<Tensor>& tensors,
                                   const std::vector<bool>& has_backward,
                                   int64_t element_bytes) {
  std::vector<int64_t> bytes(graph.ops().size(), 0);
  std::vector<bool> charged(tensors.size(), false);
  for (int i : graph.topological_order()) {
    const Op& op = graph.op(i);
    if (!has_backward[i] ||
        AutocastClassOf(op) != AutocastClass::kLowerPrecision) {
      continue;
    }
    for (int k : SavedForBackward(op).inputs) {
      if (k >= static_cast<int>(op.inputs.size()) || op.inputs[k] < 0) continue;
      const int in = op.inputs[k];
      const Tensor& t = tensors[in];
      const bool initializer =
          t.kind == TensorKind::kParameter || t.kind == TensorKind::kConstant;
      if (!initializer || charged[in] || t.dtype != DataType::kFloat32 ||
          t.num_elements() <= 0) {
        continue;
      }
      charged[in] = true;
      bytes[i] += t.num_elements() * element_bytes;
    }
  }
  return bytes;
}

}  // namespace

double TrainingView::flops(NodeKind kind) const {
  double total = 0;
  for (const TrainingNode& n : nodes_) {
    if (n.kind == kind) total += n.cost.flops;
  }
  return total;
}

double TrainingView::training_flops() const {
  double total = 0;
  for (const TrainingNode& n : nodes_) total += n.cost.flops;
  return total;
}

int64_t TrainingView::parameter_bytes() const {
  int64_t total = 0;
  for (const TrainingValue& v : values_) {
    if (v.kind == ValueKind::kParameter) total += v.bytes;
  }
  return total;
}

int TrainingView::unknown_cost_nodes() const {
  int count = 0;
  for (const TrainingNode& n : nodes_) {
    count += n.cost.status == CostStatus::kUnknown;
  }
  return count;
}

TrainingView BuildTrainingView(const Graph& graph,
                               const TrainingOptions& options) {
  TrainingView view;
  view.graph_ = &graph;
  view.options_ = options;
  // The tensors' types as the step computes them (graph/autocast.h).
  const bool autocast = options.precision != Precision::kFp32;
  std::vector<Tensor> retyped;
  if (autocast) {
    retyped = AutocastTensors(graph, options.precision,
                              options.low_precision_parameters());
  }
  const std::vector<Tensor>& tensors = autocast ? retyped : graph.tensors();
  const std::vector<Op>& ops = graph.ops();
  const int n = static_cast<int>(ops.size());
  const int num_tensors = static_cast<int>(tensors.size());
  const std::vector<int>& topo = graph.topological_order();

  // Values 0..T-1 are the forward tensors.
  for (int t = 0; t < num_tensors; ++t) {
    TrainingValue v;
    v.name = tensors[t].name;
    v.kind = KindOf(tensors[t].kind);
    v.bytes = std::max<int64_t>(0, tensors[t].bytes());
    v.producer = tensors[t].producer;
    v.tensor = t;
    view.values_.push_back(std::move(v));
  }

  // Which tensors depend on a parameter through differentiable ops.
  std::vector<bool> flows(n, false), needs(num_tensors, false);
  for (int t = 0; t < num_tensors; ++t) {
    needs[t] = tensors[t].kind == TensorKind::kParameter;
  }
  for (int i : topo) {
    const OpCostRule* rule = FindOpCostRule(ops[i].domain, ops[i].op_type);
    bool differentiable = rule == nullptr || rule->gradient != GradientRule::kNone;
    bool any = false;
    for (int in : ops[i].inputs) any |= in >= 0 && needs[in];
    flows[i] = differentiable && any;
    for (int out : ops[i].outputs) {
      if (out < 0) continue;
      DataType dtype = tensors[out].dtype;
      needs[out] = flows[i] && (IsFloatingPoint(dtype) ||
                                dtype == DataType::kUndefined);
    }
  }
  // Which of those lie on a path to the loss (a graph output).
  std::vector<bool> receives(num_tensors, false), has_backward(n, false);
  for (int out : graph.outputs()) receives[out] = needs[out];
  for (auto it = topo.rbegin(); it != topo.rend(); ++it) {
    int i = *it;
    bool any = false;
    for (int out : ops[i].outputs) any |= out >= 0 && receives[out];
    has_backward[i] = flows[i] && any;
    if (!has_backward[i]) continue;
    for (int k = 0; k < static_cast<int>(ops[i].inputs.size()); ++k) {
      int in = ops[i].inputs[k];
      if (in >= 0 && needs[in] && !IsStateInput(ops[i], k)) {
        receives[in] = true;  // state (running statistics) gets none
      }
    }
  }

  std::vector<int64_t> cast_copy_bytes(n, 0);
  if (autocast) {
    cast_copy_bytes =
        CastCopyBytes(graph, tensors, has_backward,
                      DataTypeBytes(ComputeType(options.precision)));
  }

  const std::vector<Precision> op_precision =
      OpPrecisions(graph, options.precision);
  const std::vector<Fp8CastBytes> fp8_casts =
      Fp8CastBytesPerOp(graph, tensors, op_precision, options.fp8_recipe);
  // Forward nodes: node i is op i.
  for (int i = 0; i < n; ++i) {
    TrainingNode node;
    node.key = ops[i].key;
    node.kind = NodeKind::kForward;
    node.forward_op = i;
    node.cost = ops[i].forward;
    node.compute_precision = op_precision[i];
    node.fused_attention = IsFusedAttention(ops[i]);
    node.fp8_cast_bytes = fp8_casts[i].forward;
    if (autocast && ops[i].forward.status != CostStatus::kUnknown) {
      node.cost = ComputeForwardCost(ops[i], tensors);
    }
    for (int in : ops[i].inputs) {
      if (in >= 0) AddUnique(node.inputs, in);
    }
    for (int out : ops[i].outputs) {
      if (out >= 0) node.outputs.push_back(out);
    }
    if (has_backward[i]) {
      node.saved_workspace_bytes =
          SavedWorkspaceBytes(ops[i], tensors) + cast_copy_bytes[i];
    }
    node.scratch_bytes = ForwardScratchBytes(ops[i], tensors);
    view.nodes_.push_back(std::move(node));
  }

  // Backward nodes, consumers before producers.
  view.backward_of_.assign(n, -1);
  std::vector<std::vector<int>> partials(num_tensors);
  std::vector<int> backward_order;
  for (auto it = topo.rbegin(); it != topo.rend(); ++it) {
    int i = *it;
    if (!has_backward[i]) continue;
    const Op& op = ops[i];
    int b = static_cast<int>(view.nodes_.size());
    TrainingNode node;
    node.key = absl::StrCat("grad:", op.key);
    node.kind = NodeKind::kBackward;
    node.forward_op = i;
    for (int out : op.outputs) {
      if (out < 0 || !receives[out]) continue;
      for (int p : partials[out]) AddUnique(node.inputs, p);
      if (tensors[out].is_graph_output) AddUnique(node.control_inputs, i);
    }
    std::vector<bool> input_needs_grad;
    for (int k = 0; k < static_cast<int>(op.inputs.size()); ++k) {
      int in = op.inputs[k];
      input_needs_grad.push_back(in >= 0 && needs[in] && !IsStateInput(op, k));
    }
    // What the backward keeps from the forward pass for the gradients it
    // writes.
    const SavedTensors saved = SavedForBackward(op, input_needs_grad);
    for (int k : saved.inputs) {
      if (k < static_cast<int>(op.inputs.size()) && op.inputs[k] >= 0) {
        AddUnique(node.inputs, op.inputs[k]);
      }
    }
    for (int k : saved.outputs) {
      if (k < static_cast<int>(op.outputs.size()) && op.outputs[k] >= 0) {
        AddUnique(node.inputs, op.outputs[k]);
      }
    }
    node.compute_precision = view.nodes_[i].compute_precision;
    node.fused_attention = view.nodes_[i].fused_attention;
    node.fp8_cast_bytes = fp8_casts[i].backward;
    node.cost = ComputeBackwardCost(op, tensors, input_needs_grad);
    if (op.forward.status == CostStatus::kUnknown) {
      node.cost.status = CostStatus::kUnknown;
    }
    for (int k = 0; k < static_cast<int>(op.inputs.size()); ++k) {
      int in = op.inputs[k];
      if (!input_needs_grad[k]) continue;
      if (!partials[in].empty() &&
          view.values_[partials[in].back()].producer == b) {
        continue;  // the same tensor at two input positions
      }
      TrainingValue g;
      g.name = absl::StrCat("grad:", op.key, ":", tensors[in].name);
      g.kind = ValueKind::kGradient;
      g.bytes = std::max<int64_t>(0, tensors[in].bytes());
      g.producer = b;
      g.tensor = in;
      int gv = static_cast<int>(view.values_.size());
      view.values_.push_back(std::move(g));
      node.outputs.push_back(gv);
      partials[in].push_back(gv);
    }
    view.backward_of_[i] = b;
    view.nodes_.push_back(std::move(node));
    backward_order.push_back(b);
  }

  // Parameters live with their first consumer in topological order.
  std::vector<int> position(n);
  for (int k = 0; k < n; ++k) position[topo[k]] = k;
  view.group_nodes_.assign(n, {});
  view.group_parameters_.assign(n, {});
  std::vector<int> home(num_tensors, -1);
  for (int t = 0; t < num_tensors; ++t) {
    if (tensors[t].kind != TensorKind::kParameter) continue;
    for (int c : tensors[t].consumers) {
      if (home[t] < 0 || position[c] < position[home[t]]) home[t] = c;
    }
    if (home[t] >= 0) view.group_parameters_[home[t]].push_back(t);
  }

  // Update nodes, one per parameter that receives a gradient.
  std::vector<int> update_order;
  for (int t = 0; t < num_tensors; ++t) {
    if (home[t] < 0 || !receives[t]) continue;
    TrainingNode node;
    node.key = absl::StrCat("update:", tensors[t].name);
    node.kind = NodeKind::kUpdate;
    node.forward_op = home[t];
    node.parameter = t;
    node.inputs = partials[t];
    node.inputs.push_back(t);
    double elements = static_cast<double>(tensors[t].num_elements());
    double k = static_cast<double>(partials[t].size());
    node.cost.flops =
        options.update_flops_per_element() * elements + (k - 1) * elements;
    // Partial gradients read; weight and optimizer state read and written.
    node.cost.bytes_accessed = static_cast<int64_t>(
        (k + 2 + 2 * options.optimizer_state_per_parameter_byte()) *
        static_cast<double>(view.values_[t].bytes));
    node.cost.status = CostStatus::kExact;
    update_order.push_back(static_cast<int>(view.nodes_.size()));
    view.nodes_.push_back(std::move(node));
  }

  // Consumers, groups and the topological order.
  for (int i = 0; i < static_cast<int>(view.nodes_.size()); ++i) {
    for (int v : view.nodes_[i].inputs) view.values_[v].consumers.push_back(i);
    view.group_nodes_[view.nodes_[i].forward_op].push_back(i);
  }
  // Gradient sums: the partials of each tensor, read by one sink.
  view.sum_of_.assign(view.values_.size(), -1);
  view.sums_read_by_.assign(view.nodes_.size(), {});
  for (int t = 0; t < num_tensors; ++t) {
    if (partials[t].empty()) continue;
    GradientSum sum;
    sum.tensor = t;
    sum.bytes = view.values_[t].bytes;
    sum.partials = partials[t];
    std::sort(sum.partials.begin(), sum.partials.end());
    const std::vector<int>& readers = view.values_[sum.partials[0]].consumers;
    if (readers.size() != 1) continue;  // no sink: nothing to accumulate
    sum.sink = readers[0];
    int s = static_cast<int>(view.sums_.size());
    for (int p : sum.partials) view.sum_of_[p] = s;
    view.sums_read_by_[sum.sink].push_back(s);
    view.sums_.push_back(std::move(sum));
  }
  view.topo_ = topo;
  view.topo_.insert(view.topo_.end(), backward_order.begin(),
                    backward_order.end());
  view.topo_.insert(view.topo_.end(), update_order.begin(),
                    update_order.end());
  return view;
}

absl::string_view OptimizerName(Optimizer optimizer) {
  switch (optimizer) {
    case Optimizer::kSgd:
      return "sgd";
    case Optimizer::kMomentum:
      return "momentum";
    case Optimizer::kAdam:
      return "adam";
  }
  return "momentum";
}

absl::StatusOr<Optimizer> ParseOptimizer(absl::string_view text) {
  for (Optimizer o : {Optimizer::kSgd, Optimizer::kMomentum, Optimizer::kAdam}) {
    if (text == OptimizerName(o)) return o;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "optimizer '", text, "': expected sgd, momentum or adam"));
}

TrainingOptions TrainingOptionsFor(Optimizer optimizer) {
  TrainingOptions options;
  options.optimizer = optimizer;
  return options;
}

double TrainingOptions::update_flops_per_element() const {
  switch (optimizer) {
    case Optimizer::kSgd:
      return 2;
    case Optimizer::kMomentum:
      return 4;
    case Optimizer::kAdam:
      return 16;
  }
  return 4;
}

bool TrainingOptions::low_precision_parameters() const {
  return mixed == MixedPrecision::kMaster && precision != Precision::kFp32;
}

double TrainingOptions::optimizer_state_per_parameter_byte() const {
  double fp32_tensors = 1;
  switch (optimizer) {
    case Optimizer::kSgd:
      fp32_tensors = 0;
      break;
    case Optimizer::kMomentum:
      fp32_tensors = 1;
      break;
    case Optimizer::kAdam:
      fp32_tensors = 2;
      break;
  }
  if (!low_precision_parameters()) return fp32_tensors;
  // The master copy and the state, 4 bytes each over 2-byte parameters.
  return 2 * (1 + fp32_tensors);
}

absl::string_view MixedPrecisionName(MixedPrecision mixed) {
  return mixed == MixedPrecision::kMaster ? "master" : "amp";
}

absl::StatusOr<MixedPrecision> ParseMixedPrecision(absl::string_view text) {
  for (MixedPrecision m : {MixedPrecision::kAmp, MixedPrecision::kMaster}) {
    if (text == MixedPrecisionName(m)) return m;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "mixed-precision '", text, "': expected amp or master"));
}

}  // namespace placer
