// LibTorch kernels against values computed by hand.
#include "runtime/torch_ops.h"

#include "gtest/gtest.h"

namespace placer {
namespace {

Op MakeOp(const std::string& type, int inputs, int outputs) {
  Op op;
  op.key = type;
  op.op_type = type;
  for (int i = 0; i < inputs; ++i) op.inputs.push_back(i);
  for (int i = 0; i < outputs; ++i) op.outputs.push_back(inputs + i);
  return op;
}

void SetInts(Op& op, const std::string& name, std::vector<int64_t> v) {
  op.attributes[name].kind = AttributeValue::Kind::kInts;
  op.attributes[name].ints = std::move(v);
}

void SetInt(Op& op, const std::string& name, int64_t v) {
  op.attributes[name].kind = AttributeValue::Kind::kInt;
  op.attributes[name].i = v;
}

TEST(TorchOpsTest, GemmWithTransposeAndBias) {
  Op op = MakeOp("Gemm", 3, 1);
  SetInt(op, "transB", 1);
  torch::Tensor a = torch::tensor({{1.0f, 2.0f}});
  torch::Tensor b = torch::tensor({{3.0f, 4.0f}, {5.0f, 6.0f}});  // [N, K]
  torch::Tensor c = torch::tensor({10.0f, 20.0f});
  auto out = RunTorchOp(op, {a, b, c});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(torch::equal((*out)[0], torch::tensor({{21.0f, 37.0f}})));
}

TEST(TorchOpsTest, ReshapeCopiesZeroDims) {
  Op op = MakeOp("Reshape", 2, 1);
  auto out = RunTorchOp(op, {torch::zeros({2, 3, 4}),
                             torch::tensor({0, -1}, torch::kLong)});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].sizes(), (std::vector<int64_t>{2, 12}));
}

TEST(TorchOpsTest, SplitEquallyAndGatherNegativeIndices) {
  Op split = MakeOp("Split", 1, 2);
  SetInt(split, "axis", 1);
  auto parts = RunTorchOp(split, {torch::arange(8).reshape({2, 4})});
  ASSERT_TRUE(parts.ok());
  EXPECT_TRUE(torch::equal((*parts)[1], torch::tensor({{2, 3}, {6, 7}})));
  Op gather = MakeOp("Gather", 2, 1);
  auto g = RunTorchOp(gather, {torch::tensor({10, 20, 30}),
                               torch::tensor({{-1, 0}}, torch::kLong)});
  ASSERT_TRUE(g.ok());
  EXPECT_TRUE(torch::equal((*g)[0], torch::tensor({{30, 10}})));
}

TEST(TorchOpsTest, ConvShapeAndAsymmetricPadsRejected) {
  Op conv = MakeOp("Conv", 2, 1);
  SetInts(conv, "pads", {1, 1, 1, 1});
  SetInts(conv, "strides", {2, 2});
  auto y = RunTorchOp(conv, {torch::ones({1, 2, 5, 5}), torch::ones({3, 2, 3, 3})});
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ((*y)[0].sizes(), (std::vector<int64_t>{1, 3, 3, 3}));
  // Centre output sees the full 2x3x3 window of ones.
  EXPECT_FLOAT_EQ((*y)[0][0][0][1][1].item<float>(), 18);
  SetInts(conv, "pads", {0, 0, 1, 1});
  EXPECT_EQ(RunTorchOp(conv, {torch::ones({1, 2, 5, 5}),
                              torch::ones({3, 2, 3, 3})})
                .status()
                .code(),
            absl::StatusCode::kUnimplemented);
}

TEST(TorchOpsTest, CrossEntropyMatchesHandValue) {
  Op op = MakeOp("SoftmaxCrossEntropyLoss", 2, 1);
  // Two equal logits: loss log(2) whatever the label.
  auto out = RunTorchOp(op, {torch::zeros({1, 2}), torch::tensor({1}, torch::kLong)});
  ASSERT_TRUE(out.ok());
  EXPECT_NEAR((*out)[0].item<double>(), std::log(2.0), 1e-6);
}

TEST(TorchOpsTest, UnknownOpIsAnError) {
  Op op = MakeOp("FancyOp", 1, 1);
  EXPECT_FALSE(HasTorchKernel("", "FancyOp"));
  EXPECT_EQ(RunTorchOp(op, {torch::zeros({1})}).status().code(),
            absl::StatusCode::kUnimplemented);
}

TEST(TorchOpsTest, SliceWithNegativeEndsAndSteps) {
  Op op = MakeOp("Slice", 5, 1);
  torch::Tensor x = torch::arange(10, torch::kFloat).reshape({2, 5});
  auto out = RunTorchOp(op, {x, torch::tensor({1}), torch::tensor({-1}),
                             torch::tensor({1}), torch::tensor({2})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(torch::equal((*out)[0], torch::tensor({{1.0f, 3.0f}, {6.0f, 8.0f}})));
}

TEST(TorchOpsTest, ReduceMeanKeepsDimsByDefault) {
  Op op = MakeOp("ReduceMean", 1, 1);
  SetInts(op, "axes", {-1});
  auto out = RunTorchOp(op, {torch::tensor({{1.0f, 3.0f}, {5.0f, 7.0f}})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(torch::equal((*out)[0], torch::tensor({{2.0f}, {6.0f}})));
}

TEST(TorchOpsTest, ExpandBroadcastsBothWays) {
  Op op = MakeOp("Expand", 2, 1);
  auto out = RunTorchOp(op, {torch::tensor({{1.0f}, {2.0f}}), torch::tensor({1, 3})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(torch::equal((*out)[0], torch::tensor({{1.0f, 1.0f, 1.0f},
                                                     {2.0f, 2.0f, 2.0f}})));
}

TEST(TorchOpsTest, TriluLowerWithDiagonalOffset) {
  Op op = MakeOp("Trilu", 2, 1);
  SetInt(op, "upper", 0);
  auto out = RunTorchOp(op, {torch::ones({2, 2}), torch::tensor({int64_t{-1}})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(torch::equal((*out)[0], torch::tensor({{0.0f, 0.0f}, {1.0f, 0.0f}})));
}

}  // namespace
}  // namespace placer
