// Graph is placer's own intermediate representation of a forward model: ops,
// the tensors between them, parameters and constants, and per-op forward
// costs. It carries no protobuf types; the ONNX importer (onnx_import.h) is
// the only producer from files and the zoo builds ONNX that goes through it.
//
// Contract:
//  - Op keys are unique. For an imported ONNX graph the key of node i is the
//    node's name when non-empty and unique in the graph, else "node_<i>";
//    every placement and report in the project uses these keys.
//  - ops() keeps the ONNX node order; topological_order() is a valid order
//    (Kahn's algorithm, ties broken by node index, so it is deterministic).
//  - Every tensor has at most one producer; graph inputs, parameters and
//    constants have none.
//  - After a successful import every tensor's shape is known except those
//    downstream of an op whose type we do not know (flagged, never dropped).
//  - An op the importer folds (every output computed at import: Constant
//    nodes, shape arithmetic) is not an op of the graph: its outputs are
//    constants with their data, as PyTorch never runs that arithmetic on a
//    device, so nothing places, simulates or executes it. The other ops keep
//    their keys ("node_<i>" names the file's node i).
#ifndef PLACER_GRAPH_GRAPH_H_
#define PLACER_GRAPH_GRAPH_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace placer {

enum class DataType {
  kUndefined,
  kFloat32,
  kFloat16,
  kBFloat16,
  kFloat64,
  kInt8,
  kUInt8,
  kInt16,
  kUInt16,
  kInt32,
  kUInt32,
  kInt64,
  kUInt64,
  kBool,
  kString,
  kComplex64,
  kComplex128,
};

// The product of `dims`: -1 when one is negative, INT64_MAX when the
// product overflows (dims come from files).
// The domain of the ops placer itself writes into a graph (never a file's:
// graph/attention_fusion.h's FusedAttention).
inline constexpr char kPlacerDomain[] = "placer";
// Whether `domain` is ONNX's standard one ("" or "ai.onnx") or placer's:
// the domains whose op types the op tables (costs, saved tensors, autocast,
// kernels) know by type alone.
bool IsTableDomain(absl::string_view domain);

int64_t ElementCount(absl::Span<const int64_t> dims);

// Bytes per element; 0 for kUndefined and kString.
int64_t DataTypeBytes(DataType type);
absl::string_view DataTypeName(DataType type);
bool IsFloatingPoint(DataType type);
// Maps ONNX's TensorProto.DataType numbers (as in a Cast's `to`) to ours;
// kUndefined for numbers we do not know.
DataType DataTypeFromOnnx(int64_t onnx_type);
int64_t DataTypeToOnnx(DataType type);

// Dense contents of a constant tensor, little-endian, row-major. `raw` is
// empty when the contents were not loaded (external data).
struct TensorData {
  DataType dtype = DataType::kUndefined;
  std::vector<int64_t> dims;
  std::string raw;
  // Where the file keeps the bytes when they are external data (the
  // location, relative to the model's directory) and `raw` was not read.
  std::string external_location;
};

class Graph;

// The attribute kinds placer uses. A file's graph and sparse-tensor
// attributes are kept only by name (their kind) so nothing is silently
// lost; kGraph is a body placer itself writes (graph/fused_region.h).
struct AttributeValue {
  enum class Kind { kInt, kFloat, kString, kInts, kFloats, kStrings, kTensor,
                    kGraph, kOther };
  Kind kind = Kind::kOther;
  int64_t i = 0;
  double f = 0;
  std::string s;
  std::vector<int64_t> ints;
  std::vector<double> floats;
  std::vector<std::string> strings;
  std::shared_ptr<const TensorData> tensor;
  std::shared_ptr<const Graph> graph;  // kGraph
};

enum class TensorKind {
  kActivation,  // produced by an op
  kGraphInput,  // fed by the user (data, labels)
  kParameter,   // trainable initializer (floating point)
  kConstant,    // non-trainable initializer or folded constant
};

struct Tensor {
  std::string name;
  DataType dtype = DataType::kUndefined;
  std::vector<int64_t> shape;
  bool shape_known = false;
  TensorKind kind = TensorKind::kActivation;
  bool is_graph_output = false;
  int producer = -1;             // op index, -1 for none
  std::vector<int> consumers;    // op indices, ascending, one entry per use
  std::shared_ptr<const TensorData> data;  // initializers and constants

  // -1 when the shape is unknown (or has a negative dim); INT64_MAX when
  // the product overflows.
  int64_t num_elements() const;
  int64_t bytes() const;
};

// How trustworthy an op's cost is.
enum class CostStatus {
  kExact,      // closed-form from shapes (FLOPs of a Conv, bytes of a copy)
  kEstimated,  // a rule of thumb for the op type (flagged in reports)
  kUnknown,    // the op type is unknown to the cost model (flagged)
};

struct OpCost {
  double flops = 0;
  int64_t bytes_accessed = 0;  // inputs read + outputs written
  CostStatus status = CostStatus::kUnknown;
};

struct Op {
  std::string key;      // see the node key contract above
  std::string name;     // the ONNX node name as written (may be empty)
  std::string op_type;  // e.g. "Conv"
  std::string domain;   // "" for the default ONNX domain
  std::vector<int> inputs;   // tensor indices; -1 for an omitted optional one
  std::vector<int> outputs;  // tensor indices; -1 for an omitted optional one
  std::map<std::string, AttributeValue> attributes;
  OpCost forward;

  const AttributeValue* FindAttribute(absl::string_view name) const;
  int64_t IntAttribute(absl::string_view name, int64_t default_value) const;
  std::vector<int64_t> IntsAttribute(absl::string_view name) const;
};

class Graph {
 public:
  Graph() = default;

  const std::string& name() const { return name_; }
  const std::vector<Op>& ops() const { return ops_; }
  const std::vector<Tensor>& tensors() const { return tensors_; }
  const std::vector<int>& topological_order() const { return topo_; }
  const std::vector<int>& inputs() const { return inputs_; }    // tensors
  const std::vector<int>& outputs() const { return outputs_; }  // tensors

  const Op& op(int index) const { return ops_[index]; }
  const Tensor& tensor(int index) const { return tensors_[index]; }
  int FindOp(absl::string_view key) const;        // -1 when absent
  int FindTensor(absl::string_view name) const;   // -1 when absent

  // For builders that fill in shapes and costs after the structure is
  // checked (the importer). Keys, indices and edges must not change.
  std::vector<Tensor>& mutable_tensors() { return tensors_; }
  std::vector<Op>& mutable_ops() { return ops_; }

  // Keys of the file's nodes that the importer folded to constants and
  // left out of ops() (WithoutFoldedOps), in file order.
  const std::vector<std::string>& folded_op_keys() const {
    return folded_op_keys_;
  }
  void set_folded_op_keys(std::vector<std::string> keys) {
    folded_op_keys_ = std::move(keys);
  }

  int64_t parameter_bytes() const;
  double forward_flops() const;
  // Ops whose cost is kUnknown, in graph order.
  std::vector<int> unknown_cost_ops() const;

 private:
  friend class GraphBuilder;
  std::string name_;
  std::vector<Op> ops_;
  std::vector<Tensor> tensors_;
  std::vector<int> topo_;
  std::vector<int> inputs_;
  std::vector<int> outputs_;
  std::vector<std::string> folded_op_keys_;
  std::map<std::string, int, std::less<>> op_index_;
  std::map<std::string, int, std::less<>> tensor_index_;
};

// For a graph rebuilt from `from` (the fusions, WithoutFoldedOps): each
// tensor of `to` takes the dtype, shape and data of `from`'s tensor of its
// name.
void CopyTensorFacts(const Graph& from, Graph& to);

// `graph` without the ops whose outputs are all folded constants (every
// output, at least one, a constant with data): their outputs become
// kConstant tensors that keep their data, dtype and shape; every other op
// keeps its key, name, attributes and cost, and every tensor its shape; the
// folded ops' keys are added to folded_op_keys(). Returns `graph` itself
// when no op folds; an error (naming `source`) when every op does.
absl::StatusOr<Graph> WithoutFoldedOps(const Graph& graph,
                                       const std::string& source);

// Assembles a Graph and checks its structure. Tensors are created on first
// mention; Build() links producers and consumers, assigns op keys, orders the
// ops and reports the first structural error with the op or tensor it is
// about (`source` names the file in every message).
class GraphBuilder {
 public:
  explicit GraphBuilder(std::string source, std::string graph_name);

  // Returns the tensor's index, creating it as an activation if new.
  int Tensor(absl::string_view name);
  placer::Tensor& mutable_tensor(int index) { return graph_.tensors_[index]; }
  // Declares a tensor that exists before any op runs. Declaring the same
  // name twice is an error reported by Build().
  int AddSourceTensor(absl::string_view name, TensorKind kind);
  void MarkOutput(absl::string_view name);
  // Appends an op (its key is assigned by Build()). Inputs named "" are
  // omitted optional inputs.
  Op& AddOp(std::string name, std::string op_type, std::string domain,
            const std::vector<std::string>& inputs,
            const std::vector<std::string>& outputs);
  // Appends a copy of `op` of `from`: its key as the name, its type,
  // domain, attributes and cost, its tensors by name.
  Op& AddCopyOf(const Graph& from, const Op& op);

  absl::StatusOr<Graph> Build() &&;

 private:
  std::string source_;
  Graph graph_;
  std::vector<std::string> errors_;
};

}  // namespace placer

#endif  // PLACER_GRAPH_GRAPH_H_
