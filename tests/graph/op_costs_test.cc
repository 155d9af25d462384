// Exact FLOP counts of single ops on tiny shapes, computed by hand.
#include "graph/op_costs.h"

#include "gtest/gtest.h"
#include "graph/onnx_import.h"
#include "tests/graph/test_models.h"
#include "zoo/onnx_builder.h"

namespace placer {
namespace {

using ::placer::testing::AddInput;
using ::placer::testing::AddNode;
using ::placer::testing::AddOutput;
using ::placer::testing::AddWeight;
using ::placer::testing::EmptyModel;
using ::placer::zoo::IntAttr;
using ::placer::zoo::IntsAttr;

double FlopsOf(const onnx::ModelProto& m, const std::string& key) {
  absl::StatusOr<Graph> g = ImportOnnxModel(m, "m", {});
  EXPECT_TRUE(g.ok()) << g.status();
  if (!g.ok()) return -1;
  const Op& op = g->op(g->FindOp(key));
  EXPECT_EQ(op.forward.status, CostStatus::kExact);
  return op.forward.flops;
}

TEST(OpCostsTest, ConvWithBiasAndGroups) {
  onnx::ModelProto m = EmptyModel();
  auto* g = m.mutable_graph();
  AddInput(g, "x", {1, 4, 5, 5});
  AddWeight(g, "w", {6, 2, 3, 3});  // groups = 2: 2 input channels each
  AddWeight(g, "b", {6});
  auto* n = AddNode(g, "Conv", "conv", {"x", "w", "b"}, {"y"});
  *n->add_attribute() = IntAttr("group", 2);
  *n->add_attribute() = IntsAttr("pads", {1, 1, 1, 1});
  AddOutput(g, "y");
  // Output 1x6x5x5 = 150 elements, each 2*3*3 MACs (36 FLOPs) + bias.
  EXPECT_DOUBLE_EQ(FlopsOf(m, "conv"), 150 * 36 + 150);
}

TEST(OpCostsTest, GemmWithTranspose) {
  onnx::ModelProto m = EmptyModel();
  auto* g = m.mutable_graph();
  AddInput(g, "a", {7, 3});  // transA: A is K x M = 7 x 3
  AddWeight(g, "b", {7, 5});
  auto* n = AddNode(g, "Gemm", "gemm", {"a", "b"}, {"y"});
  *n->add_attribute() = IntAttr("transA", 1);
  AddOutput(g, "y");
  EXPECT_DOUBLE_EQ(FlopsOf(m, "gemm"), 2.0 * 7 * 3 * 5);
}

TEST(OpCostsTest, BatchedMatMulAndPooling) {
  onnx::ModelProto m = EmptyModel();
  auto* g = m.mutable_graph();
  AddInput(g, "a", {2, 3, 4});
  AddInput(g, "b", {2, 4, 6});
  AddNode(g, "MatMul", "bmm", {"a", "b"}, {"c"});
  AddInput(g, "img", {1, 2, 6, 6});
  auto* p = AddNode(g, "MaxPool", "pool", {"img"}, {"p"});
  *p->add_attribute() = IntsAttr("kernel_shape", {3, 3});
  *p->add_attribute() = IntsAttr("strides", {3, 3});
  AddOutput(g, "c");
  AddOutput(g, "p");
  EXPECT_DOUBLE_EQ(FlopsOf(m, "bmm"), 2.0 * 4 * (2 * 3 * 6));
  // 1x2x2x2 outputs, 9 comparisons each.
  EXPECT_DOUBLE_EQ(FlopsOf(m, "pool"), 8 * 9);
}

TEST(OpCostsTest, FusedLstm) {
  onnx::ModelProto m = EmptyModel();
  auto* g = m.mutable_graph();
  AddInput(g, "x", {5, 2, 3});  // T=5, B=2, I=3
  AddWeight(g, "w", {1, 16, 3});  // 4H = 16
  AddWeight(g, "r", {1, 16, 4});
  auto* n = AddNode(g, "LSTM", "lstm", {"x", "w", "r"}, {"y"});
  *n->add_attribute() = IntAttr("hidden_size", 4);
  AddOutput(g, "y");
  // Per step and batch row: 2*16*(3+4) matmul + 16 bias + 17*4 gate math.
  EXPECT_DOUBLE_EQ(FlopsOf(m, "lstm"), 5 * 2 * (2 * 16 * 7 + 16 + 17 * 4));
}

TEST(OpCostsTest, BackwardOfContractionCountsOnePassPerGradient) {
  Op op;
  op.op_type = "MatMul";
  op.inputs = {0, 1};
  op.outputs = {2};
  std::vector<Tensor> t(3);
  for (auto& x : t) {
    x.dtype = DataType::kFloat32;
    x.shape_known = true;
  }
  t[0].shape = {2, 3};
  t[1].shape = {3, 4};
  t[2].shape = {2, 4};
  EXPECT_DOUBLE_EQ(ComputeForwardCost(op, t).flops, 48);
  EXPECT_DOUBLE_EQ(ComputeBackwardCost(op, t, {true, true}).flops, 96);
  EXPECT_DOUBLE_EQ(ComputeBackwardCost(op, t, {false, true}).flops, 48);
  EXPECT_DOUBLE_EQ(ComputeBackwardCost(op, t, {false, false}).flops, 0);
}

// A fused LSTM's backward: one pass back through the gates (to X and the
// previous hidden state) and one for the weight gradients: twice the
// forward, plus the output-sized reduction R's gradient is counted with.
TEST(OpCostsTest, FusedLstmBackwardIsTwoForwardPasses) {
  Op op;
  op.op_type = "LSTM";
  op.inputs = {0, 1, 2};
  op.outputs = {3};
  op.attributes["hidden_size"].kind = AttributeValue::Kind::kInt;
  op.attributes["hidden_size"].i = 4;
  std::vector<Tensor> t(4);
  for (auto& x : t) {
    x.dtype = DataType::kFloat32;
    x.shape_known = true;
  }
  t[0].shape = {5, 2, 3};
  t[1].shape = {1, 16, 3};
  t[2].shape = {1, 16, 4};
  t[3].shape = {5, 1, 2, 4};
  const double forward = 5 * 2 * (2 * 16 * 7 + 16 + 17 * 4);
  EXPECT_DOUBLE_EQ(ComputeForwardCost(op, t).flops, forward);
  EXPECT_DOUBLE_EQ(ComputeBackwardCost(op, t, {true, true, true}).flops,
                   2 * forward + 5 * 2 * 4);
  EXPECT_DOUBLE_EQ(ComputeBackwardCost(op, t, {false, true, true}).flops,
                   forward + 5 * 2 * 4);
}

TEST(OpCostsTest, UnknownTypeHasNoRule) {
  EXPECT_EQ(FindOpCostRule("", "NoSuchOp"), nullptr);
  EXPECT_EQ(FindOpCostRule("com.example", "MatMul"), nullptr);
  ASSERT_NE(FindOpCostRule("", "Shape"), nullptr);
  EXPECT_EQ(FindOpCostRule("", "Shape")->gradient, GradientRule::kNone);
}

}  // namespace
}  // namespace placer
