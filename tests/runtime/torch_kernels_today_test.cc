// The kernels the model families of today need (runtime/torch_ops_image.cc,
// runtime/torch_ops_indexing.cc, Sin and Cos), against the ONNX operator
// definitions computed by hand, and their gradients where models train
// through them.
#include <cmath>

#include "gtest/gtest.h"
#include "runtime/torch_ops.h"
#include "tests/runtime/kernel_op.h"

namespace placer {
namespace {

using test::MakeOp;
using test::SetFloat;
using test::SetInt;
using test::SetInts;
using test::SetString;

torch::Tensor Kernel(const Op& op, const std::vector<torch::Tensor>& in,
                     size_t output = 0) {
  absl::StatusOr<std::vector<torch::Tensor>> out = RunTorchOp(op, in);
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() ? (*out)[output] : torch::Tensor();
}

TEST(TorchKernelsTodayTest, InstanceNormalizationNormalizesEachChannel) {
  Op op = MakeOp("InstanceNormalization", 3, 1);
  SetFloat(op, "epsilon", 0.0);
  // One image, two channels of two values: (x - mean) / std, then scale
  // and bias per channel.
  torch::Tensor x = torch::tensor({{{1.0, 3.0}, {10.0, 30.0}}}, torch::kDouble);
  torch::Tensor y = Kernel(op, {x, torch::tensor({2.0, 1.0}, torch::kDouble),
                                torch::tensor({0.0, 5.0}, torch::kDouble)});
  EXPECT_TRUE(torch::allclose(
      y, torch::tensor({{{-2.0, 2.0}, {4.0, 6.0}}}, torch::kDouble)));
}

TEST(TorchKernelsTodayTest, GroupNormalizationScalesPerGroup) {
  Op op = MakeOp("GroupNormalization", 3, 1);
  SetInt(op, "num_groups", 2);
  SetFloat(op, "epsilon", 0.0);
  // Four channels of one value in two groups: {1, 3} and {5, 9}.
  torch::Tensor x =
      torch::tensor({1.0, 3.0, 5.0, 9.0}, torch::kDouble).reshape({1, 4, 1});
  // Opset 18's per-group scale and bias.
  torch::Tensor y = Kernel(op, {x, torch::tensor({1.0, 10.0}, torch::kDouble),
                                torch::tensor({0.0, 1.0}, torch::kDouble)});
  EXPECT_TRUE(torch::allclose(
      y.reshape(-1), torch::tensor({-1.0, 1.0, -9.0, 11.0}, torch::kDouble)));
}

TEST(TorchKernelsTodayTest, ConvTransposeUpsamplesByItsStride) {
  Op op = MakeOp("ConvTranspose", 2, 1);
  SetInts(op, "strides", {2, 2});
  // A 2x2 kernel of ones with stride 2 copies each pixel into a 2x2 block.
  torch::Tensor x =
      torch::tensor({{1.0f, 2.0f}, {3.0f, 4.0f}}).reshape({1, 1, 2, 2});
  torch::Tensor y = Kernel(op, {x, torch::ones({1, 1, 2, 2})});
  ASSERT_EQ(y.sizes(), (std::vector<int64_t>{1, 1, 4, 4}));
  EXPECT_EQ(y[0][0][1][2].item<float>(), 2.0f);
  EXPECT_EQ(y[0][0][3][0].item<float>(), 3.0f);
  Op with_output_shape = op;
  SetInts(with_output_shape, "output_shape", {4, 4});
  EXPECT_FALSE(
      RunTorchOp(with_output_shape, {x, torch::ones({1, 1, 2, 2})}).ok());
}

TEST(TorchKernelsTodayTest, ResizeNearestAsPyTorchExportsIt) {
  Op op = MakeOp("Resize", 3, 1);
  SetString(op, "mode", "nearest");
  SetString(op, "coordinate_transformation_mode", "asymmetric");
  SetString(op, "nearest_mode", "floor");
  torch::Tensor x =
      torch::tensor({{1.0f, 2.0f}, {3.0f, 4.0f}}).reshape({1, 1, 2, 2});
  torch::Tensor y =
      Kernel(op, {x, torch::Tensor(), torch::tensor({1.0f, 1.0f, 2.0f, 2.0f})});
  EXPECT_TRUE(torch::equal(y.reshape({4, 4}),
                           torch::tensor({{1.0f, 1.0f, 2.0f, 2.0f},
                                          {1.0f, 1.0f, 2.0f, 2.0f},
                                          {3.0f, 3.0f, 4.0f, 4.0f},
                                          {3.0f, 3.0f, 4.0f, 4.0f}})));
  // Gradient: each input pixel gathers its four copies.
  torch::Tensor leaf = x.clone().requires_grad_(true);
  Kernel(op, {leaf, torch::Tensor(), torch::tensor({1.0f, 1.0f, 2.0f, 2.0f})})
      .sum()
      .backward();
  EXPECT_TRUE(torch::equal(leaf.grad(), torch::full({1, 1, 2, 2}, 4.0f)));
  // Half-pixel nearest (ONNX's default) is another rule: refused.
  Op other = MakeOp("Resize", 3, 1);
  EXPECT_FALSE(RunTorchOp(other, {x, torch::Tensor(),
                                  torch::tensor({1.0f, 1.0f, 2.0f, 2.0f})})
                   .ok());
}

TEST(TorchKernelsTodayTest, TopKValuesAndIndices) {
  Op op = MakeOp("TopK", 2, 2);
  torch::Tensor x = torch::tensor({{0.1f, 0.7f, 0.2f}, {0.5f, 0.3f, 0.9f}});
  absl::StatusOr<std::vector<torch::Tensor>> out =
      RunTorchOp(op, {x, torch::tensor({2}, torch::kLong)});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(
      torch::equal((*out)[0], torch::tensor({{0.7f, 0.2f}, {0.9f, 0.5f}})));
  EXPECT_TRUE(
      torch::equal((*out)[1], torch::tensor({{1, 2}, {2, 0}}, torch::kLong)));
}

TEST(TorchKernelsTodayTest, ScatterAndGatherElementsWithNegativeIndices) {
  Op scatter = MakeOp("ScatterElements", 3, 1);
  SetInt(scatter, "axis", 1);
  torch::Tensor data = torch::zeros({2, 3});
  torch::Tensor index = torch::tensor({{0, -1}, {2, 1}}, torch::kLong);
  torch::Tensor updates = torch::tensor({{1.0f, 2.0f}, {3.0f, 4.0f}});
  EXPECT_TRUE(
      torch::equal(Kernel(scatter, {data, index, updates}),
                   torch::tensor({{1.0f, 0.0f, 2.0f}, {0.0f, 4.0f, 3.0f}})));
  Op gather = MakeOp("GatherElements", 2, 1);
  SetInt(gather, "axis", 1);
  EXPECT_TRUE(torch::equal(
      Kernel(gather,
             {torch::tensor({{1.0f, 2.0f, 3.0f}, {4.0f, 5.0f, 6.0f}}), index}),
      torch::tensor({{1.0f, 3.0f}, {6.0f, 5.0f}})));
}

TEST(TorchKernelsTodayTest, ScatterNDReplacesAndAdds) {
  Op op = MakeOp("ScatterND", 3, 1);
  torch::Tensor data = torch::arange(8, torch::kFloat).reshape({2, 4});
  // Rows 1 and 0 replaced whole (indices address the first dim).
  torch::Tensor index = torch::tensor({{1}, {0}}, torch::kLong);
  torch::Tensor rows = torch::ones({2, 4});
  EXPECT_TRUE(
      torch::equal(Kernel(op, {data, index, rows}), torch::ones({2, 4})));
  SetString(op, "reduction", "add");
  // One element, addressed by both dims.
  torch::Tensor y = Kernel(op, {data, torch::tensor({{1, 2}}, torch::kLong),
                                torch::tensor({10.0f})});
  EXPECT_EQ(y[1][2].item<float>(), 16.0f);
  EXPECT_EQ(y[0][2].item<float>(), 2.0f);
}

TEST(TorchKernelsTodayTest, CumSumExclusiveAndReverse) {
  Op op = MakeOp("CumSum", 2, 1);
  torch::Tensor x = torch::tensor({1.0f, 2.0f, 3.0f});
  torch::Tensor axis = torch::tensor(0, torch::kLong);
  EXPECT_TRUE(
      torch::equal(Kernel(op, {x, axis}), torch::tensor({1.0f, 3.0f, 6.0f})));
  SetInt(op, "exclusive", 1);
  EXPECT_TRUE(
      torch::equal(Kernel(op, {x, axis}), torch::tensor({0.0f, 1.0f, 3.0f})));
  SetInt(op, "reverse", 1);
  EXPECT_TRUE(
      torch::equal(Kernel(op, {x, axis}), torch::tensor({5.0f, 3.0f, 0.0f})));
}

TEST(TorchKernelsTodayTest, SinAndCos) {
  torch::Tensor x = torch::tensor({0.0, M_PI / 2}, torch::kDouble);
  EXPECT_TRUE(torch::allclose(Kernel(MakeOp("Sin", 1, 1), {x}),
                              torch::tensor({0.0, 1.0}, torch::kDouble)));
  EXPECT_TRUE(torch::allclose(Kernel(MakeOp("Cos", 1, 1), {x}),
                              torch::tensor({1.0, 0.0}, torch::kDouble), 1e-12,
                              1e-12));
}

}  // namespace
}  // namespace placer
