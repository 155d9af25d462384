// The executor under the step's training options (graph/training_view.h):
// each optimizer updates as torch.optim does, and a bf16 step computes in
// the types the simulator sizes it with.
#include <cmath>

#include "graph/onnx_import.h"
#include "graph/training_view.h"
#include "gtest/gtest.h"
#include "runtime/executor.h"
#include "runtime/strategy_executor.h"
#include "tests/runtime/cpu_cluster.h"
#include "zoo/zoo.h"

namespace placer {
namespace {

Graph TinyTransformer() {
  zoo::ZooParams p;
  p.batch_size = 4;
  p.hidden = 16;
  p.seq_len = 3;
  p.vocab = 20;
  p.layers = 1;
  absl::StatusOr<onnx::ModelProto> proto =
      zoo::BuildZooModel("transformer_big", p);
  EXPECT_TRUE(proto.ok()) << proto.status();
  absl::StatusOr<Graph> g = ImportOnnxModel(*proto, "transformer_big", {});
  EXPECT_TRUE(g.ok()) << g.status();
  return std::move(*g);
}

std::map<std::string, torch::Tensor> Parameters(const Graph& g, StepRunner& e) {
  std::map<std::string, torch::Tensor> result;
  for (const Tensor& t : g.tensors()) {
    if (t.kind != TensorKind::kParameter || t.consumers.empty()) continue;
    absl::StatusOr<torch::Tensor> w = e.Resident(t.name);
    EXPECT_TRUE(w.ok()) << w.status();
    if (w.ok()) result[t.name] = w->clone();
  }
  return result;
}

// One step of each optimizer from the same initial values: SGD moves a
// weight by lr g, AdamW's first step by lr (wd w + g / (|g| + eps)), with
// g the gradient that SGD's step shows.
TEST(TrainingOptionsTest, OptimizersUpdateAsTorchOptimDoes) {
  const Graph g = TinyTransformer();
  const double lr = 0.5;
  std::map<Optimizer, std::map<std::string, torch::Tensor>> after;
  std::map<std::string, torch::Tensor> before;
  for (Optimizer o :
       {Optimizer::kSgd, Optimizer::kMomentum, Optimizer::kAdam}) {
    TrainingView view = BuildTrainingView(g, TrainingOptionsFor(o));
    ExecutorOptions options;
    options.update.learning_rate = lr;
    auto e = StrategyExecutor::Create(view, Cpus(2), RoundRobin(g, 2), options);
    ASSERT_TRUE(e.ok()) << e.status();
    before = Parameters(g, **e);
    ASSERT_TRUE((*e)->Step().ok());
    after[o] = Parameters(g, **e);
  }
  int moved = 0;
  for (const auto& [name, w0] : before) {
    const torch::Tensor grad = (w0 - after[Optimizer::kSgd][name]) / lr;
    // Momentum's first step is SGD's (the buffer starts as the gradient).
    EXPECT_TRUE(torch::allclose(after[Optimizer::kMomentum][name],
                                after[Optimizer::kSgd][name], 1e-6, 1e-7))
        << name;
    const torch::Tensor adam =
        w0 - lr * (0.01 * w0 + grad / (grad.abs() + 1e-8));
    // Where the gradient is zero, SGD's difference rounds to a tiny value
    // that AdamW divides by itself: compare where it is clearly not.
    const torch::Tensor clear = grad.abs() > 1e-5;
    EXPECT_TRUE(
        torch::allclose(after[Optimizer::kAdam][name].masked_select(clear),
                        adam.masked_select(clear), 1e-3, 1e-5))
        << name;
    moved += clear.any().item<bool>();
  }
  EXPECT_GT(moved, static_cast<int>(before.size()) / 2);
}

// bf16 on CPUs: every value a link carries has the bytes the view gives it
// (the executor computes in the simulator's types), some fewer than at
// fp32; weights stay fp32; the loss follows fp32's within bf16's rounding.
TEST(TrainingOptionsTest, Bf16StepsComputeInTheViewsTypes) {
  const Graph g = TinyTransformer();
  TrainingOptions bf16_options;
  bf16_options.precision = Precision::kBf16;
  TrainingView fp32 = BuildTrainingView(g);
  TrainingView bf16 = BuildTrainingView(g, bf16_options);
  auto a = StrategyExecutor::Create(fp32, Cpus(2), RoundRobin(g, 2));
  auto b = StrategyExecutor::Create(bf16, Cpus(2), RoundRobin(g, 2));
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  int smaller = 0;
  for (int step = 0; step < 3; ++step) {
    absl::StatusOr<StepReport> ra = (*a)->Step();
    absl::StatusOr<StepReport> rb = (*b)->Step();
    ASSERT_TRUE(ra.ok()) << ra.status();
    ASSERT_TRUE(rb.ok()) << rb.status();
    EXPECT_NEAR(rb->loss, ra->loss, 0.02 * std::abs(ra->loss)) << step;
    ASSERT_FALSE(rb->transfers.empty());
    for (const MeasuredTransfer& t : rb->transfers) {
      EXPECT_EQ(t.bytes, bf16.value(t.value).bytes) << bf16.value(t.value).name;
      smaller += t.bytes < fp32.value(t.value).bytes;
    }
  }
  EXPECT_GT(smaller, 0);
  for (const auto& [name, w] : Parameters(g, **b)) {
    EXPECT_EQ(w.scalar_type(), torch::kFloat) << name;
  }
}

TEST(TrainingOptionsTest, Fp16OnACpuIsAnErrorNamingTheDevice) {
  const Graph g = TinyTransformer();
  TrainingOptions options;
  options.precision = Precision::kFp16;
  TrainingView view = BuildTrainingView(g, options);
  auto e = StrategyExecutor::Create(view, Cpus(2), RoundRobin(g, 2));
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(e.status().message().find("/cpu:0"), std::string::npos)
      << e.status();
  EXPECT_NE(e.status().message().find("bf16"), std::string::npos);
}

// fp8 is simulated only: the executor says so rather than running bf16.
TEST(TrainingOptionsTest, Fp8IsSimulatedOnly) {
  const Graph g = TinyTransformer();
  TrainingOptions options;
  options.precision = Precision::kFp8;
  TrainingView view = BuildTrainingView(g, options);
  auto e = StrategyExecutor::Create(view, Cpus(2), RoundRobin(g, 2));
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(e.status().message().find("fp8 is simulated only"),
            std::string::npos)
      << e.status();
}

// Parameters held at the compute type (--mixed-precision master) are
// simulated only: the executors keep fp32 weights under autocast.
TEST(TrainingOptionsTest, MasterWeightsAreSimulatedOnly) {
  const Graph g = TinyTransformer();
  TrainingOptions options;
  options.precision = Precision::kBf16;
  options.mixed = MixedPrecision::kMaster;
  TrainingView view = BuildTrainingView(g, options);
  auto e = StrategyExecutor::Create(view, Cpus(2), RoundRobin(g, 2));
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(e.status().message().find("mixed-precision master"),
            std::string::npos)
      << e.status();
}

}  // namespace
}  // namespace placer
