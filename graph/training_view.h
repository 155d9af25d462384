// TrainingView is the graph that placer places and simulates: one training
// step of a forward Graph, as dataflow between nodes.
//
// Contract:
//  - Nodes: every forward op; one backward node per forward op through which
//    a gradient flows to a parameter (key "grad:<op key>"); one update node
//    per parameter that receives a gradient (key "update:<tensor name>",
//    the options' optimizer).
//  - Values are what flows between nodes, each with one producer (or none:
//    graph inputs, constants and parameters exist before the step) and its
//    size in bytes (at the options' precision: graph/autocast.h's types,
//    which also give the nodes' costs). A backward node reads the gradients of
//    its op's outputs and what the op's backward keeps from the forward pass
//    (saved_for_backward.h: e.g. a MatMul's inputs, a Relu's output,
//    nothing of an Add or a Concat), and writes one partial gradient per
//    input that needs one. A value lives until its last reader, so an
//    activation only a forward op reads is freed after it, as in PyTorch.
//    What an op's backward keeps beyond its inputs and outputs (a fused
//    recurrent layer's per-step state: SavedWorkspaceBytes) is its forward
//    node's saved_workspace_bytes, held on the group's device from the
//    forward node's start until its backward node ends; what its forward
//    allocates and frees while it runs (the layer's input projections) is
//    the node's scratch_bytes. Below fp32, the lower-precision copy of a
//    parameter or constant that lower-precision ops save (one per weight
//    and step, as autocast's cast cache keeps it) is in the
//    saved_workspace_bytes of the first such op in topological order.
//  - Gradient sums: the partial gradients of one tensor are all read by one
//    node, the sink (the producer's backward node, or a parameter's update
//    node), which reads their sum. As frameworks do (PyTorch's .grad and
//    autograd input buffers), the sum is accumulated where the partials are
//    made: on each device, the first partial made there becomes that
//    device's buffer and every later one is added into it in place and
//    freed; once a device has made all of its partials, its buffer goes to
//    the sink's device once (weight-sized, however many partials it holds)
//    and is added there in turn. The simulator and the executor both follow
//    this rule; `gradient_sums` lists the sums.
//  - A backward node whose op writes a graph output also waits for the
//    forward op (the loss gradient is seeded there): `control_inputs`.
//  - Colocation: group g holds forward op g, its backward node and the update
//    nodes of the parameters whose first consumer (in topological order) is
//    op g; those parameters live on the group's device. Placing forward op g
//    places its whole group.
//  - Costs of backward nodes derive from the forward op (op_costs.h); an
//    op whose forward cost is unknown has an unknown backward cost too.
#ifndef PLACER_GRAPH_TRAINING_VIEW_H_
#define PLACER_GRAPH_TRAINING_VIEW_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "graph/autocast.h"
#include "graph/fp8_casts.h"
#include "graph/graph.h"

namespace placer {

enum class NodeKind { kForward, kBackward, kUpdate };

enum class ValueKind {
  kActivation,  // written by a forward op
  kGraphInput,  // fed to the step (data, labels)
  kConstant,    // non-trainable initializer or folded constant
  kParameter,   // trainable weight, resident on its group's device
  kGradient,    // a partial gradient written by a backward node
};

struct TrainingValue {
  std::string name;
  ValueKind kind = ValueKind::kActivation;
  int64_t bytes = 0;
  int producer = -1;           // node index, -1 for none
  std::vector<int> consumers;  // node indices, ascending, no duplicates
  int tensor = -1;             // the forward tensor (for gradients: the
                               // tensor whose gradient this is)
};

// The partial gradients of one tensor and the node that reads their sum.
struct GradientSum {
  int tensor = -1;            // the forward tensor
  int sink = -1;              // node index
  int64_t bytes = 0;          // of the tensor, hence of every partial
  std::vector<int> partials;  // value indices, ascending
};

struct TrainingNode {
  std::string key;
  NodeKind kind = NodeKind::kForward;
  int forward_op = -1;  // the op this node belongs to; also its group
  OpCost cost;
  std::vector<int> inputs;          // value indices, no duplicates
  std::vector<int> outputs;         // value indices
  std::vector<int> control_inputs;  // node indices
  int parameter = -1;  // update nodes: the parameter value they update
  // Forward nodes with a backward node: bytes the op keeps for its backward
  // that are no value of the view (saved_for_backward.h).
  int64_t saved_workspace_bytes = 0;
  // Forward nodes: bytes the op allocates and frees while it runs, beyond
  // its outputs (saved_for_backward.h's ForwardScratchBytes).
  int64_t scratch_bytes = 0;
  // The precision its FLOPs run at: the step's for the forward and
  // backward nodes of autocast's lower-precision ops, else kFp32.
  Precision compute_precision = Precision::kFp32;
  // FusedAttention's forward or backward (graph/fused_attention.h): cost
  // models may give it the rate devices reach on fused attention kernels.
  bool fused_attention = false;
  // At fp8, the forward and backward nodes of products run at fp8: the
  // bytes their scaled casts and transposed copies move in kernels of
  // their own (graph/fp8_casts.h); the cost model runs them at the
  // device's memory rate beside the product. 0 otherwise.
  int64_t fp8_cast_bytes = 0;
};

// The optimizers users train with, as their update costs and state:
//   kSgd       w -= lr * g: 2 FLOPs per element, no state.
//   kMomentum  v = mu * v + g; w -= lr * v: 4 FLOPs, one state tensor.
//   kAdam      AdamW (torch.optim.AdamW): m and v (4 + 3 FLOPs), their bias
//              corrections (2), sqrt(v) + eps (2), m / that (1), decoupled
//              weight decay and the step (4): 16 FLOPs, two state tensors
//              of the parameter's type.
enum class Optimizer { kSgd, kMomentum, kAdam };
// "sgd", "momentum", "adam".
absl::string_view OptimizerName(Optimizer optimizer);
// Parses an OptimizerName; INVALID_ARGUMENT naming `text` otherwise.
absl::StatusOr<Optimizer> ParseOptimizer(absl::string_view text);

// Where a step below fp32 keeps its weights:
//   kAmp     torch.autocast: the parameters, their gradients and the
//            optimizer state stay fp32; each lower-precision op casts the
//            weights it reads, and autocast's cache keeps one cast copy per
//            weight for the backward (training_view.h's contract).
//   kMaster  Megatron-LM's --bf16 and FSDP's mixed precision: the
//            parameters and their gradients are held at the compute type
//            (bf16, fp16; Megatron-core's default, grad_reduce_in_fp32
//            off), and the optimizer keeps an fp32 master copy beside its
//            state; no cast copies. ZeRO shards the master copy with the
//            state. Simulated only (the executors keep fp32 weights).
enum class MixedPrecision { kAmp, kMaster };
// "amp", "master".
absl::string_view MixedPrecisionName(MixedPrecision mixed);
// Parses a MixedPrecisionName; INVALID_ARGUMENT naming `text` otherwise.
absl::StatusOr<MixedPrecision> ParseMixedPrecision(absl::string_view text);

// How the step trains: the optimizer (update costs and state), the
// precision of its compute (graph/autocast.h: activations, their gradients
// and the lower-precision ops' costs) and, below fp32, where the weights
// are kept (MixedPrecision; under kAmp parameters, their gradients and the
// optimizer state stay in the file's type).
struct TrainingOptions {
  Optimizer optimizer = Optimizer::kMomentum;
  Precision precision = Precision::kFp32;
  MixedPrecision mixed = MixedPrecision::kAmp;
  // At kFp8, whose kernels cast to fp8 (graph/fp8_casts.h).
  Fp8Recipe fp8_recipe = Fp8Recipe::kTransformerEngine;

  // Whether parameters are held at the compute type: kMaster below fp32.
  bool low_precision_parameters() const;
  // FLOPs per parameter element of the update: 2, 4 or 16 (above).
  double update_flops_per_element() const;
  // Optimizer state bytes per parameter byte: 0, 1 or 2 (above); with
  // low-precision parameters the fp32 master copy and fp32 state over
  // 2-byte parameters: 2, 4 or 6.
  double optimizer_state_per_parameter_byte() const;
};

// Options with `optimizer` at fp32.
TrainingOptions TrainingOptionsFor(Optimizer optimizer);

class TrainingView {
 public:
  const Graph& forward() const { return *graph_; }
  const TrainingOptions& options() const { return options_; }
  const std::vector<TrainingNode>& nodes() const { return nodes_; }
  const std::vector<TrainingValue>& values() const { return values_; }
  const TrainingNode& node(int i) const { return nodes_[i]; }
  const TrainingValue& value(int i) const { return values_[i]; }
  // A valid order of all nodes: forward ops, then backward nodes in reverse,
  // then update nodes.
  const std::vector<int>& topological_order() const { return topo_; }
  // Nodes of colocation group g (g is a forward op index).
  const std::vector<int>& group_nodes(int g) const { return group_nodes_[g]; }
  // Parameter values living with group g.
  const std::vector<int>& group_parameters(int g) const {
    return group_parameters_[g];
  }
  int num_groups() const { return static_cast<int>(group_nodes_.size()); }
  int backward_node(int op) const { return backward_of_[op]; }  // -1: none
  const std::vector<GradientSum>& gradient_sums() const { return sums_; }
  // The gradient sum a partial gradient value belongs to; -1 for other
  // values.
  int sum_of(int value) const { return sum_of_[value]; }
  // The sums node n is the sink of, ascending.
  const std::vector<int>& sums_read_by(int node) const {
    return sums_read_by_[node];
  }

  double flops(NodeKind kind) const;
  double training_flops() const;
  int64_t parameter_bytes() const;
  // Nodes whose cost is unknown (forward, backward and update alike).
  int unknown_cost_nodes() const;

 private:
  friend TrainingView BuildTrainingView(const Graph&, const TrainingOptions&);
  const Graph* graph_ = nullptr;
  TrainingOptions options_;
  std::vector<TrainingNode> nodes_;
  std::vector<TrainingValue> values_;
  std::vector<int> topo_;
  std::vector<std::vector<int>> group_nodes_;
  std::vector<std::vector<int>> group_parameters_;
  std::vector<int> backward_of_;
  std::vector<GradientSum> sums_;
  std::vector<int> sum_of_;
  std::vector<std::vector<int>> sums_read_by_;
};

// `graph` must outlive the view.
TrainingView BuildTrainingView(const Graph& graph,
                               const TrainingOptions& options = {});

}  // namespace placer

#endif  // PLACER_GRAPH_TRAINING_VIEW_H_
