// Tensor (intra-op) parallelism over an ONNX graph: which ops a group of
// devices splits, how each tensor is then laid out across the group, and
// the collectives every change of layout needs, forward and backward.
// Generic over op types (no transformer template): per op type a rule
// says what an op needs of its inputs when it computes 1/T of its output
// along a dim, or 1/T of a dim it sums over.
//
// Contract:
//  - A tensor's layout across a group of T devices: replicated (each holds
//    it whole), split on a dim (each holds a contiguous 1/T of it; for a
//    Split op's outputs along that dim, a 1/T of each part: the producer's
//    columns are dealt so) or partial (each holds a whole tensor; their sum
//    is the value).
//  - An op runs replicated (every device computes it whole), split on an
//    output dim (each device 1/T of its outputs along it), or contracted
//    (each device sums over 1/T of a dim the op reduces: MatMul's and
//    Conv's inner dim, Gather's indexed axis, a loss's classes; outputs
//    partial). A split or contracted op costs 1/T of its time per device.
//  - A value consumed in a layout other than the one it was made in is
//    exchanged: partial -> replicated, an allreduce (forward; nothing
//    backward); partial -> split, a reduce-scatter (an all-gather of the
//    gradient backward); split -> replicated, an all-gather (backward: a
//    local slice); replicated -> split, a local slice (backward: an
//    all-gather of the gradient); split on one dim -> another, an
//    all-to-all both ways. A replicated input whose gradient the op makes
//    partial (the input of a column-parallel MatMul; a weight a split op
//    reads whole) is allreduced backward, once per tensor. Values read by
//    an op of another group (another stage, or an op not split) and graph
//    outputs are made replicated by their producer's group.
//  - Parameters take the layout their first tensor-parallel reader wants,
//    through chains of Transpose, Cast and Identity (a column-parallel
//    MatMul's transposed weight splits the weight; a tied embedding and
//    LM head split the same rows).
//  - ShardTensors chooses, op by op in topological order (deterministic):
//    an op that can read its inputs as they are and split its work does
//    (the fewest backward bytes first); one whose inputs are all replicated
//    starts a split only if a weight (a parameter of two or more dims)
//    feeds it: MatMul/Gemm on the weight's output columns, Conv on output
//    channels, Gather on the table's rows; otherwise the op runs replicated.
//    This is Megatron-LM's pattern wherever an MLP or attention block is.
//  - Thread-compatible; pure functions of their arguments.
#ifndef PLACER_GRAPH_TENSOR_SHARDING_H_
#define PLACER_GRAPH_TENSOR_SHARDING_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "base/collective.h"
#include "graph/graph.h"

namespace placer {

struct TensorLayout {
  enum class Kind { kReplicated, kSplit, kPartial };
  Kind kind = Kind::kReplicated;
  int dim = -1;  // kSplit only

  static TensorLayout Replicated() { return {}; }
  static TensorLayout Split(int dim) { return {Kind::kSplit, dim}; }
  static TensorLayout Partial() { return {Kind::kPartial, -1}; }
  bool operator==(const TensorLayout& o) const {
    return kind == o.kind && dim == o.dim;
  }
  bool operator!=(const TensorLayout& o) const { return !(*this == o); }
};

struct OpSharding {
  enum class Kind { kReplicated, kSplitOutput, kContracted };
  Kind kind = Kind::kReplicated;
  int dim = -1;  // kSplitOutput: the output dim

  static OpSharding Replicated() { return {}; }
  static OpSharding SplitOutput(int dim) { return {Kind::kSplitOutput, dim}; }
  static OpSharding Contracted() { return {Kind::kContracted, -1}; }
  bool split() const { return kind != Kind::kReplicated; }
  bool operator==(const OpSharding& o) const {
    return kind == o.kind && dim == o.dim;
  }
};

// "replicated", "out:2", "contracted" — the placement file's spelling.
std::string OpShardingName(const OpSharding& sharding);
absl::StatusOr<OpSharding> ParseOpSharding(const std::string& name);
// "replicated", "split:2", "partial".
std::string TensorLayoutName(const TensorLayout& layout);

// What an op needs of its inputs and makes, run in its sharding (what its
// type's rule says; the executor converts to and from these).
struct OpLayouts {
  std::vector<TensorLayout> inputs;    // per op input (as it reads it)
  std::vector<char> reads_any;         // per input: reads no data (Shape)
  std::vector<char> gradient_partial;  // per input: its gradient partial
  std::vector<TensorLayout> outputs;   // per op output, as made
  // Forward bytes of an internal allreduce (a Softmax over its split axis,
  // a vocabulary-parallel loss's max and sum); 0 when none.
  int64_t internal_allreduce_bytes = 0;
};

// One collective a group runs per micro-batch.
struct GroupCollective {
  int tensor = -1;  // the graph tensor it moves (or its gradient)
  int op = -1;      // whose group runs it, and in whose pass
  bool backward = false;
  Collective kind = Collective::kAllreduce;
  int64_t bytes = 0;  // of the whole tensor
};

struct TensorSharding {
  std::vector<int> group_of_op;      // T per op (1: not tensor parallel)
  std::vector<OpSharding> op;        // per op
  // Per tensor, as held after its producer's group made it (a partial sum
  // read whole is allreduced by its producer's group, so replicated here);
  // parameters: held. Its consumers convert from it to what they need.
  std::vector<TensorLayout> layout;
  std::vector<OpLayouts> op_layouts;  // per op, in its sharding
  std::vector<GroupCollective> collectives;

  // 1/T for a split or contracted op, else 1.
  double ShareOfOp(int op_index) const;
  // What one device holds of tensor `t`: its bytes / T when split.
  int64_t HeldBytes(const Graph& graph, int t) const;
  // How many ops run split or contracted.
  int SplitOps() const;
};

struct TensorShardingOptions {
  // Megatron-LM's sequence parallelism: where the choice would allreduce
  // a partial sum (a row-parallel output, before norms, dropout and the
  // residual), it reduce-scatters it instead, split on a token dim (the
  // largest dim but the last that T divides; the later on ties), and the
  // ops after run split on it until a weight's reader all-gathers it
  // (whose partial gradient is then reduce-scattered, not allreduced).
  // The same bytes on the wire; those ops' activations held 1/T.
  bool sequence_parallel = false;
};

// Tensor parallelism over `graph` with op i in group group_of_op[i] (a
// pipeline stage), of group_size[group_of_op[i]] devices. `fixed`: empty,
// or per op the sharding to use (ops in groups of 1 must be replicated);
// ShardTensors chooses where empty (contract). Errors (InvalidArgument):
// a fixed sharding the op cannot run, naming the op, the sharding and the
// dim at fault (one that does not divide by the group, or that the op
// type has no rule for); sizes that do not match the graph.
absl::StatusOr<TensorSharding> ShardTensors(
    const Graph& graph, const std::vector<int>& group_of_op,
    const std::vector<int>& group_size,
    const std::vector<OpSharding>& fixed = {},
    const TensorShardingOptions& options = {});

}  // namespace placer

#endif  // PLACER_GRAPH_TENSOR_SHARDING_H_
