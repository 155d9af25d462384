// Turning one ONNX ModelProto into our Graph: structure, shape inference
// and folding rounds, dtype and shape checks with errors that name the
// node. Sizing the graph inputs is input_shapes.h, proto conversions
// onnx_values.h, constant folding constant_folding.h, reading the file
// onnx_file.h.
#include "graph/onnx_import.h"

#include <cstring>
#include <exception>
#include <limits>
#include <set>
#include <unordered_map>
#include <utility>

#include "absl/algorithm/container.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/status_helpers.h"
#include "graph/attention_fusion.h"
#include "graph/elementwise_fusion.h"
#include "graph/constant_folding.h"
#include "graph/input_shapes.h"
#include "graph/onnx_file.h"
#include "graph/onnx_values.h"
#include "graph/op_costs.h"
#include "graph/shape_rules.h"
#include "onnx/defs/schema.h"
#include "onnx/onnx_pb.h"
#include "onnx/shape_inference/implementation.h"

namespace placer {
namespace {

constexpr int kMaxInferenceRounds = 32;

// No tensor of a real model comes near this; above it, counts overflow.
constexpr int64_t kMaxTensorBytes = int64_t{1} << 50;

// Shapes that ONNX's shape inference (1.12) leaves out although the op's
// definition fixes them: BatchNormalization's statistics outputs in training
// mode (opsets 9-15: running mean and variance, saved mean and variance),
// which are [C] like its scale. Filled only where inference gave no shape.
void FillShapesInferenceLeaves(Graph& graph) {
  std::vector<Tensor>& tensors = graph.mutable_tensors();
  for (const Op& op : graph.ops()) {
    if (op.op_type != "BatchNormalization" || !op.domain.empty() ||
        op.inputs.size() < 5) {
      continue;
    }
    const Tensor* scale = op.inputs[1] >= 0 ? &tensors[op.inputs[1]] : nullptr;
    const Tensor* mean = op.inputs[3] >= 0 ? &tensors[op.inputs[3]] : nullptr;
    if (scale == nullptr || !scale->shape_known || mean == nullptr) continue;
    for (size_t k = 1; k < op.outputs.size() && k < 5; ++k) {
      if (op.outputs[k] < 0) continue;
      Tensor& t = tensors[op.outputs[k]];
      if (t.shape_known) continue;
      t.shape = scale->shape;
      t.dtype = mean->dtype != DataType::kUndefined ? mean->dtype : scale->dtype;
      t.shape_known = true;
    }
  }
}

std::string DescribeOp(const Graph& g, int index) {
  const Op& op = g.op(index);
  return absl::StrCat("node '", op.key, "' (", op.op_type, ", index ", index,
                      ")");
}

class Importer {
 public:
  // When `owned` is set the importer may move initializer bytes out of it
  // (it is the same object as `model`) instead of copying them.
  Importer(const onnx::ModelProto& model, onnx::ModelProto* owned,
           std::string source, const ImportOptions& options)
      : model_(model), owned_(owned), source_(std::move(source)),
        options_(options) {}

  absl::StatusOr<Graph> Run();

 private:
  absl::Status Error(const std::string& message) const {
    return absl::InvalidArgumentError(absl::StrCat(source_, ": ", message));
  }
  absl::StatusOr<Graph> BuildStructure();
  absl::Status PrepareInferenceModel();
  absl::Status InferAndFold(const Graph& graph);
  absl::Status RunShapeInference(int error_mode);
  void CollectShapes();
  // Fixes the outputs of `op` that inference left symbolic by shape_rules.h;
  // true when it fixed one (inference then runs again).
  bool ApplyShapeRule(const Graph& graph, const Op& op,
                      const std::vector<FoldInput>& inputs);
  absl::Status ApplyShapes(Graph& graph);
  // For errors: the known shapes of an op's inputs, and what a suspect
  // Reshape upstream of op `op` does.
  std::string InputShapes(const Graph& graph, const Op& op) const;
  std::string ZeroCopyReshapeHint(const Graph& graph, int op) const;

  const onnx::ModelProto& model_;
  onnx::ModelProto* owned_;
  std::string source_;
  const ImportOptions& options_;

  absl::flat_hash_set<std::string> initializer_names_;
  std::map<std::string, ShapeInfo> input_shapes_;  // fixed graph inputs
  onnx::ModelProto inference_;
  absl::flat_hash_map<std::string, ShapeInfo> shapes_;
  absl::flat_hash_map<std::string, FoldedValue> constants_;
  // Shapes shape_rules.h fixed where ONNX's inference left dims symbolic,
  // given back to each inference round as value_info.
  std::map<std::string, onnx::ValueInfoProto> ruled_;
  std::vector<bool> folded_;  // per node
};

absl::StatusOr<Graph> Importer::BuildStructure() {
  const onnx::GraphProto& g = model_.graph();
  GraphBuilder builder(source_, g.name());
  for (int k = 0; k < g.initializer_size(); ++k) {
    const onnx::TensorProto& init = g.initializer(k);
    if (!initializer_names_.insert(init.name()).second) {
      return Error(absl::StrCat("initializer '", init.name(),
                                "' is defined twice"));
    }
    int index = builder.AddSourceTensor(init.name(), TensorKind::kConstant);
    placer::Tensor& t = builder.mutable_tensor(index);
    std::string stolen;
    const int64_t elements = ElementCount(
        absl::MakeConstSpan(init.dims().data(), init.dims().size()));
    if (elements < 0) {
      return Error(absl::StrCat("initializer '", init.name(),
                                "' has a negative dim"));
    }
    if (owned_ != nullptr && init.has_raw_data() &&
        elements > kMaxFoldedElements) {
      // Large weights move; small ones stay for shape inference.
      stolen.swap(*owned_->mutable_graph()->mutable_initializer(k)
                       ->mutable_raw_data());
    }
    auto data = ToTensorData(init);
    if (!stolen.empty()) data->raw.swap(stolen);
    t.data = std::move(data);
    t.dtype = t.data->dtype;
    t.shape = t.data->dims;
    t.shape_known = true;
    int64_t expect = t.bytes();
    const bool no_data = t.data->raw.empty() && expect > 0;
    if (no_data && options_.weights_optional) continue;  // sized from dims
    if (!IsExternal(init) && t.dtype != DataType::kString &&
        static_cast<int64_t>(t.data->raw.size()) != expect) {
      return Error(absl::StrCat(
          "initializer '", init.name(), "' holds ", t.data->raw.size(),
          " bytes of data but its dims and type need ", expect,
          no_data ? absl::StrCat(" (a file stripped of its weights: ",
                                 options_.names.weights_optional,
                                 " imports it for placement, which needs "
                                 "only the dims)")
                  : " (truncated or corrupt tensor)"));
    }
  }
  for (const onnx::ValueInfoProto& in : g.input()) {
    if (initializer_names_.count(in.name())) continue;  // IR < 4 style
    builder.AddSourceTensor(in.name(), TensorKind::kGraphInput);
  }
  for (const onnx::NodeProto& node : g.node()) {
    std::vector<std::string> inputs(node.input().begin(), node.input().end());
    std::vector<std::string> outputs(node.output().begin(),
                                     node.output().end());
    Op& op = builder.AddOp(node.name(), node.op_type(), node.domain(), inputs,
                           outputs);
    for (const onnx::AttributeProto& a : node.attribute()) {
      op.attributes[a.name()] = ToAttribute(a);
    }
  }
  for (const onnx::ValueInfoProto& out : g.output()) {
    builder.MarkOutput(out.name());
  }
  return std::move(builder).Build();
}

absl::Status Importer::PrepareInferenceModel() {
  const onnx::GraphProto& g = model_.graph();
  inference_.set_ir_version(model_.ir_version());
  *inference_.mutable_opset_import() = model_.opset_import();
  *inference_.mutable_functions() = model_.functions();
  onnx::GraphProto* ig = inference_.mutable_graph();
  ig->set_name(g.name());
  // Initializers: types and dims always; data only where it may feed a shape
  // computation (small and not external), so weights are never copied.
  for (const onnx::TensorProto& init : g.initializer()) {
    onnx::TensorProto* t = ig->add_initializer();
    t->set_name(init.name());
    t->set_data_type(init.data_type());
    *t->mutable_dims() = init.dims();
    const int64_t n = ElementCount(
        absl::MakeConstSpan(init.dims().data(), init.dims().size()));
    if (n <= kMaxFoldedElements && !IsExternal(init)) {
      *t = init;
      // Floating-point initializers are weights (or may be): what is
      // computed from them changes as training updates them, so it is
      // never folded into a constant. Shape arithmetic is integral.
      if (IsFloatingPoint(DataTypeFromOnnx(init.data_type()))) continue;
      if (auto v = ToFolded(*ToTensorData(init))) {
        constants_[init.name()] = std::move(*v);
      }
    }
  }
  for (const onnx::ValueInfoProto& in : g.input()) {
    if (initializer_names_.count(in.name())) continue;
    onnx::ValueInfoProto* v = ig->add_input();
    *v = in;
    auto* shape = v->mutable_type()->mutable_tensor_type()->mutable_shape();
    shape->clear_dim();
    for (const Dim& d : input_shapes_[in.name()].dims) {
      shape->add_dim()->set_dim_value(d.value);
    }
  }
  // Outputs keep their element type only: the file's declared shapes may
  // be symbolic and would clash with the fixed ones.
  for (const onnx::ValueInfoProto& out : g.output()) {
    onnx::ValueInfoProto* v = ig->add_output();
    v->set_name(out.name());
    if (out.type().has_tensor_type()) {
      v->mutable_type()->mutable_tensor_type()->set_elem_type(
          out.type().tensor_type().elem_type());
    }
  }
  // Only nodes with a schema, and not downstream of one without, go to
  // ONNX's inference: ONNX 1.12 crashed (null dereference inside libonnx,
  // found by fuzzing) on a graph whose LSTM's type was mangled to "Batc",
  // in the nodes reading its untyped outputs. Such ops and what they feed
  // are opaque to placer anyway: those tensors stay unshaped.
  absl::flat_hash_set<std::string> opaque;
  std::map<std::string, int> opset;
  for (const onnx::OperatorSetIdProto& o : model_.opset_import()) {
    opset[o.domain() == "ai.onnx" ? "" : o.domain()] =
        static_cast<int>(o.version());
  }
  for (const onnx::NodeProto& node : g.node()) {
    const std::string domain = node.domain() == "ai.onnx" ? "" : node.domain();
    auto version = opset.find(domain);
    bool skip = version == opset.end() ||
                onnx::OpSchemaRegistry::Schema(node.op_type(), version->second,
                                               domain) == nullptr;
    for (const std::string& in : node.input()) skip |= opaque.contains(in);
    if (skip) {
      for (const std::string& out : node.output()) opaque.insert(out);
      continue;
    }
    *ig->add_node() = node;
  }
  return absl::OkStatus();
}

absl::Status Importer::RunShapeInference(int error_mode) {
  inference_.mutable_graph()->clear_value_info();
  for (const auto& [name, info] : ruled_) {
    *inference_.mutable_graph()->add_value_info() = info;
  }
  // No data propagation: ONNX 1.12's propagation dereferences the type of
  // an input that inference left untyped (a SEGV inside libonnx, found by
  // fuzzing: an LSTM whose weights were damaged, read by a Squeeze;
  // fuzz/crashes/onnx_import/crash-25b40abb...). Exporters' shape
  // arithmetic is folded by constant_folding.h instead; the 106 real-world
  // exports in tests/fixtures import identically without it.
  onnx::ShapeInferenceOptions options(/*check_type=*/false, error_mode,
                                      /*data_prop=*/false);
  try {
    onnx::shape_inference::InferShapes(
        inference_, onnx::OpSchemaRegistry::Instance(), options);
  } catch (const std::exception& e) {
    return Error(absl::StrCat("ONNX shape inference failed: ", e.what()));
  }
  return absl::OkStatus();
}

void Importer::CollectShapes() {
  shapes_.clear();
  const onnx::GraphProto& ig = inference_.graph();
  for (const auto& [name, info] : input_shapes_) shapes_[name] = info;
  for (const onnx::TensorProto& init : ig.initializer()) {
    ShapeInfo info;
    info.dtype = DataTypeFromOnnx(init.data_type());
    info.has_shape = true;
    for (int64_t d : init.dims()) info.dims.push_back({d, ""});
    shapes_[init.name()] = info;
  }
  for (const auto* list : {&ig.value_info(), &ig.output()}) {
    for (const onnx::ValueInfoProto& v : *list) {
      ShapeInfo info = FromTypeProto(v.type());
      auto [it, inserted] = shapes_.emplace(v.name(), info);
      if (!inserted && !it->second.fully_known() && info.fully_known()) {
        it->second = info;
      }
    }
  }
  for (auto& [name, info] : shapes_) {
    if (info.fully_known()) info.known = info.values();
  }
}

absl::Status Importer::InferAndFold(const Graph& graph) {
  const int n = static_cast<int>(graph.ops().size());
  folded_.assign(n, false);
  for (int round = 0; round < kMaxInferenceRounds; ++round) {
    RETURN_IF_ERROR(RunShapeInference(/*error_mode=*/0));
    CollectShapes();
    bool changed = false;
    std::vector<FoldedValue> outputs;
    for (int i : graph.topological_order()) {
      if (folded_[i]) continue;
      const Op& op = graph.op(i);
      std::optional<std::vector<FoldedValue>> result;
      if (op.op_type == "Constant" && op.domain.empty()) {
        if (auto v = ConstantNodeValue(op)) {
          result = std::vector<FoldedValue>{std::move(*v)};
        }
      } else {
        std::vector<FoldInput> inputs;
        bool any_known = false;
        for (int in : op.inputs) {
          FoldInput fi;
          if (in >= 0) {
            const std::string& name = graph.tensor(in).name;
            if (auto c = constants_.find(name); c != constants_.end()) {
              fi.value = &c->second;
              fi.dtype = c->second.dtype;
              any_known = true;
            }
            if (auto s = shapes_.find(name);
                s != shapes_.end() && s->second.fully_known()) {
              fi.shape = &s->second.known;
              fi.dtype = s->second.dtype;
              any_known = true;
            }
          }
          inputs.push_back(fi);
        }
        if (any_known) result = FoldNode(op, inputs);
        if (!result && any_known && ApplyShapeRule(graph, op, inputs)) {
          changed = true;
        }
      }
      if (!result || result->size() < op.outputs.size()) continue;
      folded_[i] = true;
      changed = true;
      for (size_t k = 0; k < op.outputs.size(); ++k) {
        if (op.outputs[k] >= 0) {
          constants_[graph.tensor(op.outputs[k]).name] = (*result)[k];
        }
      }
    }
    if (!changed) return absl::OkStatus();
    // Replace the folded nodes by initializers and infer again.
    onnx::GraphProto* ig = inference_.mutable_graph();
    google::protobuf::RepeatedPtrField<onnx::NodeProto> kept;
    absl::flat_hash_set<std::string> present;
    for (const onnx::TensorProto& t : ig->initializer()) present.insert(t.name());
    for (const onnx::NodeProto& node : ig->node()) {
      bool all_folded = true;
      for (const std::string& out : node.output()) {
        all_folded &= out.empty() || constants_.count(out) > 0;
      }
      if (!all_folded) {
        *kept.Add() = node;
        continue;
      }
      for (const std::string& out : node.output()) {
        if (!out.empty() && present.insert(out).second) {
          *ig->add_initializer() = ToTensorProto(out, constants_[out]);
        }
      }
    }
    ig->mutable_node()->Swap(&kept);
  }
  return Error("shape folding did not converge");
}

bool Importer::ApplyShapeRule(const Graph& graph, const Op& op,
                              const std::vector<FoldInput>& inputs) {
  bool unknown = false;
  for (int out : op.outputs) {
    if (out < 0) continue;
    auto s = shapes_.find(graph.tensor(out).name);
    unknown |= s == shapes_.end() || !s->second.fully_known();
  }
  if (!unknown) return false;
  std::optional<std::vector<std::vector<int64_t>>> shapes =
      InferOutputShapes(op, inputs);
  if (!shapes || shapes->size() < op.outputs.size()) return false;
  bool added = false;
  for (size_t k = 0; k < op.outputs.size(); ++k) {
    if (op.outputs[k] < 0) continue;
    const std::string& name = graph.tensor(op.outputs[k]).name;
    auto s = shapes_.find(name);
    if (s == shapes_.end() || s->second.dtype == DataType::kUndefined ||
        s->second.fully_known() || ruled_.count(name) > 0) {
      continue;
    }
    onnx::ValueInfoProto info;
    info.set_name(name);
    auto* tensor = info.mutable_type()->mutable_tensor_type();
    tensor->set_elem_type(
        static_cast<int32_t>(DataTypeToOnnx(s->second.dtype)));
    for (int64_t d : (*shapes)[k])
      tensor->mutable_shape()->add_dim()->set_dim_value(d);
    ruled_[name] = std::move(info);
    added = true;
  }
  return added;
}

std::string Importer::InputShapes(const Graph& graph, const Op& op) const {
  std::vector<std::string> known;
  for (int in : op.inputs) {
    if (in < 0) continue;
    auto s = shapes_.find(graph.tensor(in).name);
    known.push_back(
        s != shapes_.end() && s->second.fully_known()
            ? absl::StrCat("[", absl::StrJoin(s->second.known, ","), "]")
            : "?");
  }
  return absl::StrCat("; its inputs are ", absl::StrJoin(known, " and "));
}

std::string Importer::ZeroCopyReshapeHint(const Graph& graph, int op) const {
  // The nearest Reshape upstream whose constant shape copies dims by 0 from
  // an input of another rank: what torch.onnx (1.13) writes for
  // repeat_interleave once it has lost a static shape.
  std::vector<int> stack = {op};
  absl::flat_hash_set<int> seen = {op};
  while (!stack.empty()) {
    const Op& o = graph.op(stack.back());
    stack.pop_back();
    if (o.op_type == "Reshape" && o.inputs.size() == 2 &&
        o.IntAttribute("allowzero", 0) == 0) {
      auto shape = constants_.find(graph.tensor(o.inputs[1]).name);
      auto input = shapes_.find(graph.tensor(o.inputs[0]).name);
      if (shape != constants_.end() && input != shapes_.end() &&
          input->second.has_shape &&
          input->second.dims.size() != shape->second.ints.size() &&
          absl::c_linear_search(shape->second.ints, 0)) {
        return absl::StrCat(
            ". Upstream, node '", o.key,
            "' (Reshape) copies dims by 0 from "
            "an input of rank ",
            input->second.dims.size(),
            " into a shape of "
            "rank ",
            shape->second.ints.size(),
            ", which does not keep the dims it means to: torch.onnx (1.13) "
            "writes this for repeat_interleave on a tensor whose static shape "
            "it lost, so the file does not compute the model's shapes. "
            "Exporting the repeat as expand + reshape (Hugging Face's "
            "repeat_kv) avoids it");
      }
    }
    for (int in : o.inputs) {
      if (in < 0) continue;
      const int p = graph.tensor(in).producer;
      if (p >= 0 && seen.insert(p).second) stack.push_back(p);
    }
  }
  return "";
}

absl::Status Importer::ApplyShapes(Graph& graph) {
  std::vector<Tensor>& tensors = graph.mutable_tensors();
  for (Tensor& t : tensors) {
    if (t.kind != TensorKind::kActivation) {
      if (t.kind == TensorKind::kGraphInput) {
        const ShapeInfo& info = input_shapes_[t.name];
        t.dtype = info.dtype;
        t.shape = info.values();
        t.shape_known = true;
      }
      continue;
    }
    if (auto c = constants_.find(t.name); c != constants_.end()) {
      t.dtype = c->second.dtype;
      t.shape = c->second.dims;
      t.shape_known = true;
      t.data = std::make_shared<TensorData>(c->second.ToTensorData());
      continue;
    }
    auto s = shapes_.find(t.name);
    if (s == shapes_.end()) continue;
    t.dtype = s->second.dtype;
    if (s->second.fully_known()) {
      t.shape = s->second.values();
      t.shape_known = true;
    }
  }

  // Floating-point initializers used at a trainable position are
  // parameters; the rest are constants. An Identity passes its output's
  // uses on to its input (exporters write Identity(initializer) for
  // shared or renamed weights and BatchNorm statistics).
  std::vector<bool> trainable_use(tensors.size(), false);
  const std::vector<int>& topo = graph.topological_order();
  for (auto it = topo.rbegin(); it != topo.rend(); ++it) {
    const Op& op = graph.op(*it);
    const bool identity = op.op_type == "Identity" && op.domain.empty();
    for (int k = 0; k < static_cast<int>(op.inputs.size()); ++k) {
      int in = op.inputs[k];
      if (in < 0) continue;
      bool trainable = true;
      if (identity) {
        trainable = !op.outputs.empty() && op.outputs[0] >= 0 &&
                    (trainable_use[op.outputs[0]] ||
                     tensors[op.outputs[0]].is_graph_output);
      } else {
        trainable = !IsStateInput(op, k);
      }
      if (trainable) trainable_use[in] = true;
    }
  }
  for (int t = 0; t < static_cast<int>(tensors.size()); ++t) {
    if (trainable_use[t] && initializer_names_.count(tensors[t].name) &&
        IsFloatingPoint(tensors[t].dtype)) {
      tensors[t].kind = TensorKind::kParameter;
    }
  }

  FillShapesInferenceLeaves(graph);

  // Tensors downstream of an op we cannot reason about may stay unshaped.
  std::vector<bool> opaque(graph.ops().size(), false);
  for (int i : graph.topological_order()) {
    const Op& op = graph.op(i);
    bool is_opaque = FindOpCostRule(op.domain, op.op_type) == nullptr &&
                     !folded_[i];
    for (int in : op.inputs) {
      if (in >= 0 && !tensors[in].shape_known && tensors[in].producer >= 0 &&
          opaque[tensors[in].producer]) {
        is_opaque = true;
      }
    }
    opaque[i] = is_opaque;
    if (is_opaque) continue;
    for (int out : op.outputs) {
      if (out < 0 || tensors[out].shape_known) continue;
      const Tensor& t = tensors[out];
      std::string what = "its rank is unknown";
      auto s = shapes_.find(t.name);
      if (s != shapes_.end() && s->second.has_shape) {
        for (size_t k = 0; k < s->second.dims.size(); ++k) {
          const Dim& d = s->second.dims[k];
          if (d.value >= 0) continue;
          what = absl::StrCat("dim ", k, " is ",
                              d.param.empty()
                                  ? std::string("unknown")
                                  : absl::StrCat("symbolic '", d.param, "'"));
          break;
        }
      }
      std::string hint;
      // A strict re-run usually says why inference gave up.
      if (absl::Status strict = RunShapeInference(/*error_mode=*/1);
          !strict.ok()) {
        hint = absl::StrCat(" (", strict.message(), ")");
      }
      return Error(absl::StrCat("unresolved shape: tensor '", t.name,
                                "' written by ", DescribeOp(graph, i), ": ",
                                what, InputShapes(graph, op), hint,
                                ZeroCopyReshapeHint(graph, i)));
    }
  }

  // Absurd dimensions would overflow every byte and FLOP count after this.
  for (const Tensor& t : tensors) {
    if (!t.shape_known) continue;
    int64_t bytes = std::max<int64_t>(1, DataTypeBytes(t.dtype));
    bool overflow = false;
    for (int64_t d : t.shape) {
      overflow |= d < 0 || __builtin_mul_overflow(bytes, d, &bytes);
    }
    if (overflow || bytes > kMaxTensorBytes) {
      return Error(absl::StrCat(
          "tensor '", t.name, "'",
          t.producer >= 0 ? absl::StrCat(" written by ",
                                         DescribeOp(graph, t.producer))
                          : std::string(),
          " has shape [", absl::StrJoin(t.shape, ","),
          "]: more than 2^50 bytes (1 PiB); the dimensions are absurd"));
    }
  }

  for (Op& op : graph.mutable_ops()) {
    op.forward = ComputeForwardCost(op, tensors);
  }
  return absl::OkStatus();
}

absl::StatusOr<Graph> Importer::Run() {
  if (!model_.has_graph()) {
    return Error(
        "the model has no graph: the file is not an ONNX model or is "
        "truncated");
  }
  if (options_.max_ops > 0 && model_.graph().node_size() > options_.max_ops) {
    return absl::ResourceExhaustedError(absl::StrCat(
        source_, ": the model has ", model_.graph().node_size(),
        " nodes, over the limit of ", options_.max_ops));
  }
  ASSIGN_OR_RETURN(Graph graph, BuildStructure());
  ASSIGN_OR_RETURN(
      input_shapes_,
      FixInputShapes(model_.graph(), initializer_names_, options_, source_));
  RETURN_IF_ERROR(PrepareInferenceModel());
  RETURN_IF_ERROR(InferAndFold(graph));
  RETURN_IF_ERROR(ApplyShapes(graph));
  ASSIGN_OR_RETURN(graph, WithoutFoldedOps(graph, source_));
  if (options_.fuse_attention) {
    ASSIGN_OR_RETURN(graph, FuseAttention(graph));
  }
  if (options_.fuse_elementwise) return FuseElementwise(graph);
  return graph;
}

}  // namespace

absl::StatusOr<Graph> ImportOnnxModel(const onnx::ModelProto& model,
                                      const std::string& source,
                                      const ImportOptions& options) {
  return Importer(model, nullptr, source, options).Run();
}

absl::StatusOr<Graph> ImportOnnxModel(onnx::ModelProto&& model,
                                      const std::string& source,
                                      const ImportOptions& options) {
  return Importer(model, &model, source, options).Run();
}

absl::StatusOr<Graph> ImportOnnxBytes(const std::string& bytes,
                                      const std::string& source,
                                      const ImportOptions& options) {
  onnx::ModelProto model;
  if (bytes.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": the file is empty"));
  }
  if (!model.ParseFromString(bytes)) {
    return absl::InvalidArgumentError(absl::StrCat(
        source, ": not an ONNX model: ", bytes.size(),
        " bytes do not parse as an ONNX ModelProto (the file is truncated "
        "or is not a protobuf)"));
  }
  return ImportOnnxModel(std::move(model), source, options);
}

absl::StatusOr<Graph> ImportOnnxFile(const std::string& path,
                                     const ImportOptions& options) {
  ASSIGN_OR_RETURN(onnx::ModelProto model, ReadOnnxFile(path));
  return ImportOnnxModel(std::move(model), path, options);
}

}  // namespace placer
