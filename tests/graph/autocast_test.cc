#include "graph/autocast.h"

#include "graph/onnx_import.h"
#include "graph/training_view.h"
#include "gtest/gtest.h"
#include "onnx/onnx_pb.h"
#include "tests/graph/test_models.h"

namespace placer {
namespace {

using testing::AddInput;
using testing::AddNode;
using testing::AddWeight;

// x[4,8] -> MatMul W[8,16] -> Add b -> Relu -> Softmax; out = softmax + relu;
// also a Cast of the relu to float.
Graph Linear() {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(17);
  onnx::GraphProto* g = m.mutable_graph();
  AddInput(g, "x", {4, 8});
  AddWeight(g, "W", {8, 16});
  AddWeight(g, "b", {16});
  AddNode(g, "MatMul", "mm", {"x", "W"}, {"mm_out"});
  AddNode(g, "Add", "bias", {"mm_out", "b"}, {"lin"});
  AddNode(g, "Relu", "relu", {"lin"}, {"act"});
  AddNode(g, "Softmax", "softmax", {"act"}, {"sm"});
  onnx::NodeProto* cast = AddNode(g, "Cast", "cast", {"act"}, {"act32"});
  auto* to = cast->add_attribute();
  to->set_name("to");
  to->set_type(onnx::AttributeProto::INT);
  to->set_i(onnx::TensorProto::FLOAT);
  AddNode(g, "Add", "mix", {"sm", "act"}, {"mixed"});
  AddNode(g, "Mul", "out", {"mixed", "act32"}, {"y"});
  g->add_output()->set_name("y");
  absl::StatusOr<Graph> graph = ImportOnnxModel(m, "linear", {});
  EXPECT_TRUE(graph.ok()) << graph.status();
  return std::move(*graph);
}

DataType TypeOf(const Graph& g, const std::vector<Tensor>& tensors,
                const std::string& name) {
  return tensors[g.FindTensor(name)].dtype;
}

TEST(AutocastTest, TypesFollowTorchAutocastsLists) {
  const Graph g = Linear();
  const std::vector<Tensor> bf16 = AutocastTensors(g, Precision::kBf16);
  EXPECT_EQ(TypeOf(g, bf16, "mm_out"), DataType::kBFloat16);
  // The bias does not widen a lower-precision product (torch's linear).
  EXPECT_EQ(TypeOf(g, bf16, "lin"), DataType::kBFloat16);
  EXPECT_EQ(TypeOf(g, bf16, "act"), DataType::kBFloat16);
  EXPECT_EQ(TypeOf(g, bf16, "sm"), DataType::kFloat32);
  // Cast says its type; two activations promote to the wider.
  EXPECT_EQ(TypeOf(g, bf16, "act32"), DataType::kFloat32);
  EXPECT_EQ(TypeOf(g, bf16, "mixed"), DataType::kFloat32);
  // Weights and inputs keep the file's type.
  EXPECT_EQ(TypeOf(g, bf16, "W"), DataType::kFloat32);
  EXPECT_EQ(TypeOf(g, bf16, "x"), DataType::kFloat32);
  const std::vector<Tensor> fp16 = AutocastTensors(g, Precision::kFp16);
  EXPECT_EQ(TypeOf(g, fp16, "act"), DataType::kFloat16);
  const std::vector<Tensor> fp32 = AutocastTensors(g, Precision::kFp32);
  for (size_t t = 0; t < fp32.size(); ++t) {
    EXPECT_EQ(fp32[t].dtype, g.tensor(static_cast<int>(t)).dtype);
  }
  EXPECT_EQ(*ParsePrecision("bf16"), Precision::kBf16);
  EXPECT_FALSE(ParsePrecision("tf32").ok());
}

TEST(AutocastTest, TheViewSizesAndCostsAtTheStepsPrecision) {
  const Graph g = Linear();
  TrainingOptions options;
  options.precision = Precision::kBf16;
  const TrainingView fp32 = BuildTrainingView(g);
  const TrainingView bf16 = BuildTrainingView(g, options);
  const int mm = g.FindOp("mm");
  const int mm_out = g.FindTensor("mm_out");
  const int w = g.FindTensor("W");
  // Activations at 2 bytes, the weight at 4.
  EXPECT_EQ(fp32.value(mm_out).bytes, 4 * 16 * 4);
  EXPECT_EQ(bf16.value(mm_out).bytes, 4 * 16 * 2);
  EXPECT_EQ(bf16.value(w).bytes, 8 * 16 * 4);
  EXPECT_EQ(bf16.value(g.FindTensor("sm")).bytes, 4 * 16 * 4);
  // The weight's gradient stays fp32; the activation's is bf16.
  const TrainingNode& grad_mm = bf16.node(bf16.backward_node(mm));
  ASSERT_EQ(grad_mm.outputs.size(), 1u);
  EXPECT_EQ(bf16.value(grad_mm.outputs[0]).bytes, 8 * 16 * 4);
  const TrainingNode& grad_relu =
      bf16.node(bf16.backward_node(g.FindOp("relu")));
  ASSERT_EQ(grad_relu.outputs.size(), 1u);
  EXPECT_EQ(bf16.value(grad_relu.outputs[0]).bytes, 4 * 16 * 2);
  // MatMul: x (fp32, 128 B) and W (512 B) read, 128 B of bf16 written; the
  // same FLOPs, at the lower precision, forward and backward.
  EXPECT_EQ(fp32.node(mm).cost.bytes_accessed, 128 + 512 + 256);
  EXPECT_EQ(bf16.node(mm).cost.bytes_accessed, 128 + 512 + 128);
  EXPECT_DOUBLE_EQ(bf16.node(mm).cost.flops, fp32.node(mm).cost.flops);
  EXPECT_EQ(bf16.node(mm).compute_precision, Precision::kBf16);
  EXPECT_EQ(grad_mm.compute_precision, Precision::kBf16);
  EXPECT_EQ(bf16.node(g.FindOp("relu")).compute_precision, Precision::kFp32);
  EXPECT_EQ(fp32.node(mm).compute_precision, Precision::kFp32);
  // Its backward keeps the bf16 copy of W autocast made (256 B).
  EXPECT_EQ(fp32.node(mm).saved_workspace_bytes, 0);
  EXPECT_EQ(bf16.node(mm).saved_workspace_bytes, 8 * 16 * 2);
  // Updates read fp32 weights and gradients either way.
  for (size_t i = 0; i < fp32.nodes().size(); ++i) {
    if (fp32.node(i).kind != NodeKind::kUpdate) continue;
    EXPECT_EQ(fp32.node(i).cost.bytes_accessed,
              bf16.node(i).cost.bytes_accessed);
  }
}

// A tied output layer reads the embedding transposed, not the parameter
// itself: it is still the output layer (bf16), and the last linear layer
// before it computes at fp8.
TEST(AutocastTest, Fp8KeepsATiedOutputLayerAtBf16) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(17);
  onnx::GraphProto* g = m.mutable_graph();
  AddInput(g, "x", {4, 8});
  AddWeight(g, "W1", {8, 8});
  AddWeight(g, "E", {16, 8});
  AddNode(g, "MatMul", "linear", {"x", "W1"}, {"h"});
  AddNode(g, "Transpose", "tie", {"E"}, {"Et"});
  AddNode(g, "MatMul", "output", {"h", "Et"}, {"y"});
  g->add_output()->set_name("y");
  absl::StatusOr<Graph> graph = ImportOnnxModel(m, "tied", {});
  ASSERT_TRUE(graph.ok()) << graph.status();
  const std::vector<Precision> at = OpPrecisions(*graph, Precision::kFp8);
  EXPECT_EQ(at[graph->FindOp("linear")], Precision::kFp8);
  EXPECT_EQ(at[graph->FindOp("output")], Precision::kBf16);
}

// fp8 (Transformer Engine over bf16 autocast): products with a weight at
// fp8 but for the last one (the output layer), products of two activations
// at bf16, the tensors as at bf16; backward nodes compute as their forward.
TEST(AutocastTest, Fp8RunsTheLinearLayersProductsAtFp8) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(17);
  onnx::GraphProto* g = m.mutable_graph();
  AddInput(g, "x", {4, 8});
  AddWeight(g, "W1", {8, 8});
  AddWeight(g, "W2", {4, 8});
  AddNode(g, "MatMul", "linear", {"x", "W1"}, {"h"});
  AddNode(g, "Transpose", "t", {"h"}, {"ht"});
  AddNode(g, "MatMul", "scores", {"h", "ht"}, {"s"});
  AddNode(g, "MatMul", "output", {"s", "W2"}, {"y"});
  g->add_output()->set_name("y");
  absl::StatusOr<Graph> graph = ImportOnnxModel(m, "fp8", {});
  ASSERT_TRUE(graph.ok()) << graph.status();
  const std::vector<Precision> at = OpPrecisions(*graph, Precision::kFp8);
  EXPECT_EQ(at[graph->FindOp("linear")], Precision::kFp8);
  EXPECT_EQ(at[graph->FindOp("scores")], Precision::kBf16);
  EXPECT_EQ(at[graph->FindOp("output")], Precision::kBf16);
  EXPECT_EQ(at[graph->FindOp("t")], Precision::kFp32);
  for (Precision p : OpPrecisions(*graph, Precision::kBf16)) {
    EXPECT_NE(p, Precision::kFp8);
  }
  const std::vector<Tensor> fp8 = AutocastTensors(*graph, Precision::kFp8);
  const std::vector<Tensor> bf16 = AutocastTensors(*graph, Precision::kBf16);
  for (size_t t = 0; t < fp8.size(); ++t) {
    EXPECT_EQ(fp8[t].dtype, bf16[t].dtype) << fp8[t].name;
  }
  TrainingOptions options;
  options.precision = Precision::kFp8;
  const TrainingView view = BuildTrainingView(*graph, options);
  const int linear = graph->FindOp("linear");
  EXPECT_EQ(view.node(linear).compute_precision, Precision::kFp8);
  EXPECT_EQ(view.node(view.backward_node(linear)).compute_precision,
            Precision::kFp8);
  EXPECT_EQ(view.node(graph->FindOp("output")).compute_precision,
            Precision::kBf16);
  EXPECT_EQ(ParsePrecision("fp8").value(), Precision::kFp8);
  EXPECT_EQ(PrecisionName(Precision::kFp8), "fp8");
}

// A weight read by two products (an unrolled layer's): one bf16 copy, on
// the first product, whose backward runs last.
TEST(AutocastTest, ASharedWeightIsCastOnce) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(17);
  onnx::GraphProto* g = m.mutable_graph();
  AddInput(g, "x", {4, 8});
  AddWeight(g, "W", {8, 8});
  AddNode(g, "MatMul", "first", {"x", "W"}, {"h1"});
  AddNode(g, "MatMul", "second", {"h1", "W"}, {"h2"});
  g->add_output()->set_name("h2");
  absl::StatusOr<Graph> graph = ImportOnnxModel(m, "shared", {});
  ASSERT_TRUE(graph.ok()) << graph.status();
  TrainingOptions options;
  options.precision = Precision::kBf16;
  const TrainingView view = BuildTrainingView(*graph, options);
  EXPECT_EQ(view.node(graph->FindOp("first")).saved_workspace_bytes, 8 * 8 * 2);
  EXPECT_EQ(view.node(graph->FindOp("second")).saved_workspace_bytes, 0);
}

// --mixed-precision master (Megatron-LM's bf16, FSDP's mixed precision):
// the weights and their gradients at 2 bytes, no cast copies, and the
// optimizer's state carrying the fp32 master copy: 12 bytes a parameter
// with Adam, 6 per parameter byte; the update reads and writes them.
TEST(AutocastTest, MasterWeightsHoldParametersAtTheComputeType) {
  const Graph g = Linear();
  TrainingOptions amp;
  amp.precision = Precision::kBf16;
  amp.optimizer = Optimizer::kAdam;
  TrainingOptions master = amp;
  master.mixed = MixedPrecision::kMaster;
  EXPECT_FALSE(amp.low_precision_parameters());
  EXPECT_TRUE(master.low_precision_parameters());
  EXPECT_EQ(amp.optimizer_state_per_parameter_byte(), 2);
  EXPECT_EQ(master.optimizer_state_per_parameter_byte(), 6);
  TrainingOptions fp32_master = master;
  fp32_master.precision = Precision::kFp32;
  EXPECT_FALSE(fp32_master.low_precision_parameters());
  const TrainingView a = BuildTrainingView(g, amp);
  const TrainingView m = BuildTrainingView(g, master);
  const int mm = g.FindOp("mm");
  const int w = g.FindTensor("W");
  EXPECT_EQ(a.value(w).bytes, 8 * 16 * 4);
  EXPECT_EQ(m.value(w).bytes, 8 * 16 * 2);
  EXPECT_EQ(a.node(mm).saved_workspace_bytes, 8 * 16 * 2);
  EXPECT_EQ(m.node(mm).saved_workspace_bytes, 0);
  const TrainingNode& grad_mm = m.node(m.backward_node(mm));
  ASSERT_EQ(grad_mm.outputs.size(), 1u);
  EXPECT_EQ(m.value(grad_mm.outputs[0]).bytes, 8 * 16 * 2);
  for (size_t i = 0; i < m.nodes().size(); ++i) {
    if (m.node(i).kind != NodeKind::kUpdate || m.node(i).parameter != w) {
      continue;
    }
    // One partial read; W and 12 bytes of state read and written a
    // parameter: (1 + 2 + 2 x 6) x 256 B.
    EXPECT_EQ(m.node(i).cost.bytes_accessed, (1 + 2 + 2 * 6) * 8 * 16 * 2);
  }
  EXPECT_EQ(ParseMixedPrecision("master").value(), MixedPrecision::kMaster);
  EXPECT_FALSE(ParseMixedPrecision("fp32-master").ok());
}

}  // namespace
}  // namespace placer
