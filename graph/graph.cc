#include "graph/graph.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <queue>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_helpers.h"

namespace placer {

int64_t DataTypeBytes(DataType type) {
  switch (type) {
    case DataType::kFloat32: return 4;
    case DataType::kFloat16: return 2;
    case DataType::kBFloat16: return 2;
    case DataType::kFloat64: return 8;
    case DataType::kInt8: return 1;
    case DataType::kUInt8: return 1;
    case DataType::kInt16: return 2;
    case DataType::kUInt16: return 2;
    case DataType::kInt32: return 4;
    case DataType::kUInt32: return 4;
    case DataType::kInt64: return 8;
    case DataType::kUInt64: return 8;
    case DataType::kBool: return 1;
    case DataType::kComplex64: return 8;
    case DataType::kComplex128: return 16;
    case DataType::kString:
    case DataType::kUndefined: return 0;
  }
  return 0;
}

absl::string_view DataTypeName(DataType type) {
  switch (type) {
    case DataType::kFloat32: return "float32";
    case DataType::kFloat16: return "float16";
    case DataType::kBFloat16: return "bfloat16";
    case DataType::kFloat64: return "float64";
    case DataType::kInt8: return "int8";
    case DataType::kUInt8: return "uint8";
    case DataType::kInt16: return "int16";
    case DataType::kUInt16: return "uint16";
    case DataType::kInt32: return "int32";
    case DataType::kUInt32: return "uint32";
    case DataType::kInt64: return "int64";
    case DataType::kUInt64: return "uint64";
    case DataType::kBool: return "bool";
    case DataType::kString: return "string";
    case DataType::kComplex64: return "complex64";
    case DataType::kComplex128: return "complex128";
    case DataType::kUndefined: return "undefined";
  }
  return "undefined";
}

bool IsFloatingPoint(DataType type) {
  return type == DataType::kFloat32 || type == DataType::kFloat16 ||
         type == DataType::kBFloat16 || type == DataType::kFloat64;
}

namespace {
// Index i holds ONNX TensorProto.DataType number i.
constexpr DataType kOnnxTypes[] = {
    DataType::kUndefined, DataType::kFloat32,   DataType::kUInt8,
    DataType::kInt8,      DataType::kUInt16,    DataType::kInt16,
    DataType::kInt32,     DataType::kInt64,     DataType::kString,
    DataType::kBool,      DataType::kFloat16,   DataType::kFloat64,
    DataType::kUInt32,    DataType::kUInt64,    DataType::kComplex64,
    DataType::kComplex128, DataType::kBFloat16,
};
constexpr int64_t kNumOnnxTypes = sizeof(kOnnxTypes) / sizeof(kOnnxTypes[0]);
}  // namespace

DataType DataTypeFromOnnx(int64_t onnx_type) {
  return onnx_type >= 0 && onnx_type < kNumOnnxTypes ? kOnnxTypes[onnx_type]
                                                     : DataType::kUndefined;
}

int64_t DataTypeToOnnx(DataType type) {
  for (int64_t i = 0; i < kNumOnnxTypes; ++i) {
    if (kOnnxTypes[i] == type) return i;
  }
  return 0;
}

bool IsTableDomain(absl::string_view domain) {
  return domain.empty() || domain == "ai.onnx" || domain == kPlacerDomain;
}

int64_t ElementCount(absl::Span<const int64_t> dims) {
  int64_t n = 1;
  for (int64_t d : dims) {
    if (d < 0) return -1;
    if (__builtin_mul_overflow(n, d, &n)) {
      return std::numeric_limits<int64_t>::max();
    }
  }
  return n;
}

// Saturates instead of overflowing (found by fuzzing), so size limits
// downstream see an absurd size.
int64_t Tensor::num_elements() const {
  return shape_known ? ElementCount(shape) : -1;
}

int64_t Tensor::bytes() const {
  int64_t n = num_elements();
  if (n < 0) return -1;
  int64_t bytes;
  if (__builtin_mul_overflow(n, DataTypeBytes(dtype), &bytes)) {
    return std::numeric_limits<int64_t>::max();
  }
  return bytes;
}

const AttributeValue* Op::FindAttribute(absl::string_view name) const {
  auto it = attributes.find(std::string(name));
  return it == attributes.end() ? nullptr : &it->second;
}

int64_t Op::IntAttribute(absl::string_view name, int64_t default_value) const {
  const AttributeValue* a = FindAttribute(name);
  return a != nullptr && a->kind == AttributeValue::Kind::kInt ? a->i
                                                               : default_value;
}

std::vector<int64_t> Op::IntsAttribute(absl::string_view name) const {
  const AttributeValue* a = FindAttribute(name);
  if (a == nullptr || a->kind != AttributeValue::Kind::kInts) return {};
  return a->ints;
}

int Graph::FindOp(absl::string_view key) const {
  auto it = op_index_.find(key);
  return it == op_index_.end() ? -1 : it->second;
}

int Graph::FindTensor(absl::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? -1 : it->second;
}

int64_t Graph::parameter_bytes() const {
  int64_t total = 0;
  for (const placer::Tensor& t : tensors_) {
    if (t.kind == TensorKind::kParameter && t.shape_known) total += t.bytes();
  }
  return total;
}

double Graph::forward_flops() const {
  double total = 0;
  for (const Op& op : ops_) total += op.forward.flops;
  return total;
}

std::vector<int> Graph::unknown_cost_ops() const {
  std::vector<int> result;
  for (int i = 0; i < static_cast<int>(ops_.size()); ++i) {
    if (ops_[i].forward.status == CostStatus::kUnknown) result.push_back(i);
  }
  return result;
}

GraphBuilder::GraphBuilder(std::string source, std::string graph_name)
    : source_(std::move(source)) {
  graph_.name_ = std::move(graph_name);
}

int GraphBuilder::Tensor(absl::string_view name) {
  auto it = graph_.tensor_index_.find(name);
  if (it != graph_.tensor_index_.end()) return it->second;
  int index = static_cast<int>(graph_.tensors_.size());
  placer::Tensor t;
  t.name = std::string(name);
  graph_.tensors_.push_back(std::move(t));
  graph_.tensor_index_.emplace(std::string(name), index);
  return index;
}

int GraphBuilder::AddSourceTensor(absl::string_view name, TensorKind kind) {
  bool existed = graph_.tensor_index_.count(name) > 0;
  int index = Tensor(name);
  placer::Tensor& t = graph_.tensors_[index];
  if (existed && t.kind != TensorKind::kActivation) {
    errors_.push_back(absl::StrCat("tensor '", name,
                                   "' is declared twice as an input or "
                                   "initializer"));
  }
  t.kind = kind;
  if (kind == TensorKind::kGraphInput) graph_.inputs_.push_back(index);
  return index;
}

void GraphBuilder::MarkOutput(absl::string_view name) {
  int index = Tensor(name);
  graph_.tensors_[index].is_graph_output = true;
  graph_.outputs_.push_back(index);
}

Op& GraphBuilder::AddOp(std::string name, std::string op_type,
                        std::string domain,
                        const std::vector<std::string>& inputs,
                        const std::vector<std::string>& outputs) {
  Op op;
  op.name = std::move(name);
  op.op_type = std::move(op_type);
  op.domain = std::move(domain);
  for (const std::string& in : inputs) {
    op.inputs.push_back(in.empty() ? -1 : Tensor(in));
  }
  for (const std::string& out : outputs) {
    op.outputs.push_back(out.empty() ? -1 : Tensor(out));
  }
  graph_.ops_.push_back(std::move(op));
  return graph_.ops_.back();
}

namespace {

std::string DescribeOp(const Op& op, int index) {
  return absl::StrCat("node '", op.key, "' (", op.op_type, ", index ", index,
                      ")");
}

}  // namespace

absl::StatusOr<Graph> GraphBuilder::Build() && {
  auto fail = [&](const std::string& message) {
    return absl::InvalidArgumentError(absl::StrCat(source_, ": ", message));
  };
  if (!errors_.empty()) return fail(errors_.front());
  Graph& g = graph_;
  if (g.ops_.empty()) return fail("the graph has no nodes (empty graph)");

  // Keys: the node name when non-empty and unique, else node_<i>.
  std::map<std::string, int> name_count;
  for (const Op& op : g.ops_) {
    if (!op.name.empty()) ++name_count[op.name];
  }
  for (int i = 0; i < static_cast<int>(g.ops_.size()); ++i) {
    Op& op = g.ops_[i];
    op.key = (!op.name.empty() && name_count[op.name] == 1)
                 ? op.name
                 : absl::StrCat("node_", i);
    if (!g.op_index_.emplace(op.key, i).second) {
      return fail(absl::StrCat("node key '", op.key, "' of node index ", i,
                               " collides with the name of node index ",
                               g.op_index_[op.key],
                               "; rename one of the nodes"));
    }
  }

  // Producers: one per tensor, never a source tensor.
  for (int i = 0; i < static_cast<int>(g.ops_.size()); ++i) {
    const Op& op = g.ops_[i];
    for (int out : op.outputs) {
      if (out < 0) continue;
      placer::Tensor& t = g.tensors_[out];
      if (t.kind != TensorKind::kActivation) {
        return fail(absl::StrCat(DescribeOp(op, i), " writes '", t.name,
                                 "', which is already a graph input or "
                                 "initializer (duplicate output name)"));
      }
      if (t.producer >= 0) {
        return fail(absl::StrCat(DescribeOp(op, i), " writes '", t.name,
                                 "', which ",
                                 DescribeOp(g.ops_[t.producer], t.producer),
                                 " already writes (duplicate output name)"));
      }
      t.producer = i;
    }
  }
  // Consumers; every input must be defined.
  for (int i = 0; i < static_cast<int>(g.ops_.size()); ++i) {
    const Op& op = g.ops_[i];
    for (int k = 0; k < static_cast<int>(op.inputs.size()); ++k) {
      int in = op.inputs[k];
      if (in < 0) continue;
      placer::Tensor& t = g.tensors_[in];
      if (t.kind == TensorKind::kActivation && t.producer < 0) {
        return fail(absl::StrCat(DescribeOp(op, i), " input ", k, " '",
                                 t.name,
                                 "' is not defined: no node produces it and "
                                 "it is neither a graph input nor an "
                                 "initializer"));
      }
      if (t.consumers.empty() || t.consumers.back() != i) {
        t.consumers.push_back(i);
      }
    }
  }
  for (int out : g.outputs_) {
    const placer::Tensor& t = g.tensors_[out];
    if (t.kind == TensorKind::kActivation && t.producer < 0) {
      return fail(absl::StrCat("graph output '", t.name,
                               "' is not produced by any node"));
    }
  }

  // Kahn's algorithm, smallest node index first.
  const int n = static_cast<int>(g.ops_.size());
  std::vector<int> pending(n, 0);
  for (int i = 0; i < n; ++i) {
    for (int in : g.ops_[i].inputs) {
      if (in >= 0 && g.tensors_[in].producer >= 0) ++pending[i];
    }
  }
  std::priority_queue<int, std::vector<int>, std::greater<int>> ready;
  for (int i = 0; i < n; ++i) {
    if (pending[i] == 0) ready.push(i);
  }
  g.topo_.reserve(n);
  while (!ready.empty()) {
    int i = ready.top();
    ready.pop();
    g.topo_.push_back(i);
    for (int out : g.ops_[i].outputs) {
      if (out < 0) continue;
      for (int c : g.tensors_[out].consumers) {
        // A consumer reading the same tensor twice was counted twice.
        for (int in : g.ops_[c].inputs) {
          if (in == out && --pending[c] == 0) ready.push(c);
        }
      }
    }
  }
  if (static_cast<int>(g.topo_.size()) != n) {
    std::vector<std::string> stuck;
    for (int i = 0; i < n && stuck.size() < 5; ++i) {
      if (pending[i] > 0) stuck.push_back(DescribeOp(g.ops_[i], i));
    }
    return fail(absl::StrCat("the graph has a cycle; nodes on or after it: ",
                             absl::StrJoin(stuck, ", ")));
  }
  return std::move(graph_);
}

namespace {

// Whether every output of `op` is a constant with data (at least one).
bool AllOutputsFolded(const Graph& graph, const Op& op) {
  bool any = false;
  for (int out : op.outputs) {
    if (out < 0) continue;
    if (graph.tensor(out).data == nullptr) return false;
    any = true;
  }
  return any;
}

}  // namespace

absl::StatusOr<Graph> WithoutFoldedOps(const Graph& graph,
                                       const std::string& source) {
  std::vector<char> folded(graph.ops().size(), 0);
  int kept = 0;
  for (size_t i = 0; i < graph.ops().size(); ++i) {
    folded[i] = AllOutputsFolded(graph, graph.op(i));
    kept += !folded[i];
  }
  if (kept == static_cast<int>(graph.ops().size())) return graph;
  if (kept == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        source, ": every node computes a constant (the importer folds all ",
        graph.ops().size(), "); there is nothing to train or place"));
  }
  const std::vector<Tensor>& tensors = graph.tensors();
  GraphBuilder builder(source, graph.name());
  for (const Tensor& t : tensors) {
    if (t.kind != TensorKind::kActivation) {
      builder.AddSourceTensor(t.name, t.kind);
    } else if (t.producer >= 0 && folded[t.producer]) {
      builder.AddSourceTensor(t.name, TensorKind::kConstant);
    }
  }
  std::vector<const Op*> copied_from;
  std::vector<std::string> folded_keys = graph.folded_op_keys();
  for (size_t i = 0; i < graph.ops().size(); ++i) {
    const Op& op = graph.op(i);
    if (folded[i]) {
      folded_keys.push_back(op.key);
      continue;
    }
    builder.AddCopyOf(graph, op);
    copied_from.push_back(&op);
  }
  for (int out : graph.outputs()) builder.MarkOutput(tensors[out].name);
  ASSIGN_OR_RETURN(Graph result, std::move(builder).Build());
  CopyTensorFacts(graph, result);
  result.set_folded_op_keys(std::move(folded_keys));
  for (size_t i = 0; i < copied_from.size(); ++i) {
    result.mutable_ops()[i].name = copied_from[i]->name;
  }
  return result;
}

void CopyTensorFacts(const Graph& from, Graph& to) {
  for (Tensor& t : to.mutable_tensors()) {
    const Tensor& old = from.tensor(from.FindTensor(t.name));
    t.dtype = old.dtype;
    t.shape = old.shape;
    t.shape_known = old.shape_known;
    t.data = old.data;
  }
}

Op& GraphBuilder::AddCopyOf(const Graph& from, const Op& op) {
  auto name_of = [&](int t) {
    return t < 0 ? std::string() : from.tensor(t).name;
  };
  std::vector<std::string> inputs, outputs;
  for (int t : op.inputs) inputs.push_back(name_of(t));
  for (int t : op.outputs) outputs.push_back(name_of(t));
  Op& copy = AddOp(op.key, op.op_type, op.domain, inputs, outputs);
  copy.attributes = op.attributes;
  copy.forward = op.forward;
  return copy;
}

}  // namespace placer
