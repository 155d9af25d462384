// LibTorch kernels against values computed by hand.
#include "runtime/torch_ops.h"

#include <cmath>

#include "gtest/gtest.h"
#include "runtime/executor_ops.h"
#include "tests/runtime/kernel_op.h"

namespace placer {
namespace {

using test::MakeOp;
using test::SetInt;
using test::SetInts;

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

namespace placer {
namespace {

void SetString(Op& op, const std::string& name, const std::string& v) {
  op.attributes[name].kind = AttributeValue::Kind::kString;
  op.attributes[name].s = v;
}

void SetFloat(Op& op, const std::string& name, double v) {
  op.attributes[name].kind = AttributeValue::Kind::kFloat;
  op.attributes[name].f = v;
}

TEST(TorchOpsTest, KernelListWithoutTorchIsTheRegistry) {
  std::vector<std::string> listed = ExecutorOpTypes();
  EXPECT_EQ(listed, TorchKernelOpTypes());
  EXPECT_TRUE(ExecutorHasKernel("", "LSTM"));
  EXPECT_FALSE(ExecutorHasKernel("com.microsoft", "LSTM"));
}

// ONNX's LSTM equations (operators.md, gates i, o, f, c) stepped by hand
// in float64, one direction; W [4H, I], R [4H, H], B [8H].
std::pair<torch::Tensor, torch::Tensor> ReferenceLstm(
    const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& r,
    const torch::Tensor& b, bool reverse) {
  const int64_t steps = x.size(0), batch = x.size(1), hidden = r.size(1);
  torch::Tensor h = torch::zeros({batch, hidden}, torch::kDouble);
  torch::Tensor c = torch::zeros({batch, hidden}, torch::kDouble);
  std::vector<torch::Tensor> ys(steps);
  for (int64_t k = 0; k < steps; ++k) {
    int64_t t = reverse ? steps - 1 - k : k;
    torch::Tensor g = torch::matmul(x[t], w.t()) + torch::matmul(h, r.t()) +
                      b.narrow(0, 0, 4 * hidden) +
                      b.narrow(0, 4 * hidden, 4 * hidden);
    auto gate = [&](int j) { return g.narrow(1, j * hidden, hidden); };
    torch::Tensor i = torch::sigmoid(gate(0)), o = torch::sigmoid(gate(1));
    torch::Tensor f = torch::sigmoid(gate(2)), cc = torch::tanh(gate(3));
    c = f * c + i * cc;
    h = o * torch::tanh(c);
    ys[t] = h;
  }
  return {torch::stack(ys), h};
}

TEST(TorchOpsTest, BidirectionalLstmFollowsOnnxGateOrder) {
  torch::manual_seed(3);
  const int64_t T = 3, B = 2, I = 3, H = 4;
  torch::Tensor x = torch::randn({T, B, I}, torch::kDouble);
  torch::Tensor w = torch::randn({2, 4 * H, I}, torch::kDouble);
  torch::Tensor r = torch::randn({2, 4 * H, H}, torch::kDouble);
  torch::Tensor b = torch::randn({2, 8 * H}, torch::kDouble);
  Op op = MakeOp("LSTM", 4, 3);
  SetInt(op, "hidden_size", H);
  SetString(op, "direction", "bidirectional");
  auto out = RunTorchOp(op, {x, w, r, b});
  ASSERT_TRUE(out.ok()) << out.status();
  auto [y0, h0] = ReferenceLstm(x, w[0], r[0], b[0], false);
  auto [y1, h1] = ReferenceLstm(x, w[1], r[1], b[1], true);
  ASSERT_EQ((*out)[0].sizes(), (std::vector<int64_t>{T, 2, B, H}));
  EXPECT_TRUE(torch::allclose((*out)[0].select(1, 0), y0, 1e-9, 1e-9));
  EXPECT_TRUE(torch::allclose((*out)[0].select(1, 1), y1, 1e-9, 1e-9));
  EXPECT_TRUE(torch::allclose((*out)[1][0], h0, 1e-9, 1e-9));
  EXPECT_TRUE(torch::allclose((*out)[1][1], h1, 1e-9, 1e-9));
}

TEST(TorchOpsTest, GruWithLinearBeforeResetFollowsOnnx) {
  torch::manual_seed(4);
  const int64_t T = 3, B = 2, I = 3, H = 4;
  torch::Tensor x = torch::randn({B, T, I}, torch::kDouble);  // layout 1
  torch::Tensor w = torch::randn({1, 3 * H, I}, torch::kDouble);
  torch::Tensor r = torch::randn({1, 3 * H, H}, torch::kDouble);
  torch::Tensor b = torch::randn({1, 6 * H}, torch::kDouble);
  Op op = MakeOp("GRU", 4, 2);
  SetInt(op, "hidden_size", H);
  SetInt(op, "linear_before_reset", 1);
  SetInt(op, "layout", 1);
  auto out = RunTorchOp(op, {x, w, r, b});
  ASSERT_TRUE(out.ok()) << out.status();
  // ONNX: z, r, h gates; ht = (1 - z) * h~ + z * H,
  // h~ = tanh(X Wh + Wbh + r * (H Rh + Rbh)).
  torch::Tensor h = torch::zeros({B, H}, torch::kDouble);
  auto part = [&](const torch::Tensor& m, int j) {
    return m.narrow(0, j * H, H);
  };
  for (int64_t t = 0; t < T; ++t) {
    torch::Tensor xt = x.select(1, t);
    torch::Tensor z = torch::sigmoid(
        torch::matmul(xt, part(w[0], 0).t()) + part(b[0], 0) +
        torch::matmul(h, part(r[0], 0).t()) + part(b[0], 3));
    torch::Tensor rr = torch::sigmoid(
        torch::matmul(xt, part(w[0], 1).t()) + part(b[0], 1) +
        torch::matmul(h, part(r[0], 1).t()) + part(b[0], 4));
    torch::Tensor hh = torch::tanh(
        torch::matmul(xt, part(w[0], 2).t()) + part(b[0], 2) +
        rr * (torch::matmul(h, part(r[0], 2).t()) + part(b[0], 5)));
    h = (1 - z) * hh + z * h;
    EXPECT_TRUE(torch::allclose((*out)[0].select(1, t).select(1, 0), h,
                                1e-9, 1e-9)) << "step " << t;
  }
  // Y_h in layout 1 is [B, D, H].
  EXPECT_TRUE(torch::allclose((*out)[1].select(1, 0), h, 1e-9, 1e-9));
  SetInt(op, "linear_before_reset", 0);
  EXPECT_EQ(RunTorchOp(op, {x, w, r, b}).status().code(),
            absl::StatusCode::kUnimplemented);
}

TEST(TorchOpsTest, TrainingBatchNormUpdatesRunningStatisticsInPlace) {
  // ONNX opset 14+: training_mode=1, three outputs, momentum 0.9.
  Op op = MakeOp("BatchNormalization", 5, 3);
  SetInt(op, "training_mode", 1);
  SetFloat(op, "momentum", 0.9);
  SetFloat(op, "epsilon", 0.0);
  torch::Tensor x = torch::tensor({1.0, 3.0, 5.0, 7.0}, torch::kDouble)
                        .reshape({4, 1, 1, 1});
  torch::Tensor scale = torch::ones({1}, torch::kDouble);
  torch::Tensor bias = torch::zeros({1}, torch::kDouble);
  torch::Tensor mean = torch::zeros({1}, torch::kDouble);
  torch::Tensor var = torch::ones({1}, torch::kDouble);
  auto out = RunTorchOp(op, {x, scale, bias, mean, var});
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->size(), 3u);
  // Batch mean 4, biased variance 5 (normalizes), unbiased 20/3 (running).
  EXPECT_NEAR((*out)[0][0].item<double>(), -3 / std::sqrt(5.0), 1e-12);
  EXPECT_NEAR(mean.item<double>(), 0.9 * 0 + 0.1 * 4, 1e-12);
  EXPECT_NEAR(var.item<double>(), 0.9 * 1 + 0.1 * 20.0 / 3, 1e-12);
  EXPECT_NEAR((*out)[1].item<double>(), 0.4, 1e-12);
  // Opset 14+ without training_mode is inference: the running statistics.
  Op eval = MakeOp("BatchNormalization", 5, 1);
  SetFloat(eval, "epsilon", 0.0);
  auto y = RunTorchOp(eval, {x, scale, bias, mean, var});
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_NEAR((*y)[0][0].item<double>(),
              (1 - 0.4) / std::sqrt(0.9 + 2.0 / 3), 1e-12);
  EXPECT_NEAR(mean.item<double>(), 0.4, 1e-12);  // unchanged
}

}  // namespace
}  // namespace placer

namespace placer {
namespace {

TEST(TorchOpsTest, PadConstantAndEdge) {
  Op op = MakeOp("Pad", 3, 1);
  torch::Tensor x = torch::tensor({{1.0f, 2.0f}, {3.0f, 4.0f}});
  // [x0_begin, x1_begin, x0_end, x1_end]
  auto out = RunTorchOp(op, {x, torch::tensor({0, 1, 1, 0}),
                             torch::tensor(9.0f)});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(torch::equal(
      (*out)[0], torch::tensor({{9.0f, 1.0f, 2.0f}, {9.0f, 3.0f, 4.0f},
                                {9.0f, 9.0f, 9.0f}})));
  Op edge = MakeOp("Pad", 2, 1);
  edge.attributes["mode"].kind = AttributeValue::Kind::kString;
  edge.attributes["mode"].s = "edge";
  auto e = RunTorchOp(edge, {x, torch::tensor({0, 1, 0, 1})});
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_TRUE(torch::equal(
      (*e)[0], torch::tensor({{1.0f, 1.0f, 2.0f, 2.0f},
                              {3.0f, 3.0f, 4.0f, 4.0f}})));
}

TEST(TorchOpsTest, HardSigmoidUsesOnnxDefaults) {
  Op op = MakeOp("HardSigmoid", 1, 1);
  auto out = RunTorchOp(op, {torch::tensor({-5.0f, 0.0f, 1.0f, 5.0f})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(torch::allclose((*out)[0],
                              torch::tensor({0.0f, 0.5f, 0.7f, 1.0f})));
}

}  // namespace
}  // namespace placer
