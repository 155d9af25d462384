// The executor against PyTorch itself: models exported by torch.onnx in
// training mode (tests/fixtures/numerics/record.py; float64, weights kept,
// the input batch and labels baked in, the loss as the graph's output)
// run one step on one CPU device and on two; the loss, every parameter
// gradient and BatchNorm's updated running statistics must match what
// PyTorch computed for the same module: loss to 1e-9, gradients to 1e-6
// relative (float64; the executor sums partial gradients in another
// order), running statistics to 1e-6 (ONNX's float32 momentum).
#include <cmath>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "graph/onnx_import.h"
#include "graph/training_view.h"
#include "gtest/gtest.h"
#include "profiles/cluster.h"
#include "runtime/executor.h"
#include "runtime/strategy_executor.h"

namespace placer {
namespace {

constexpr char kDir[] = "tests/fixtures/numerics/";

struct Expected {
  double loss = 0;
  std::map<std::string, std::vector<double>> grads, states;
};

Expected ReadExpected(const std::string& name) {
  std::ifstream in(std::string(kDir) + name + ".expected.txt");
  Expected e;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream s(line);
    std::string kind, key;
    s >> kind;
    if (kind == "loss") {
      s >> e.loss;
      continue;
    }
    int64_t n = 0;
    s >> key >> n;
    std::vector<double> v(n);
    for (double& x : v) s >> x;
    (kind == "grad" ? e.grads : e.states)[key] = std::move(v);
  }
  return e;
}

Cluster Cpus(int devices) {
  std::string text = "name: \"cpus\"\n";
  for (int d = 0; d < devices; ++d) {
    text += "devices { name: \"/cpu:" + std::to_string(d) +
            "\" kind: CPU peak_flops: 8e10 memory_bandwidth: 1e10 "
            "memory_bytes: 8000000000 }\n";
  }
  text += "default_link { latency_seconds: 2e-6 bandwidth: 5e9 }\n";
  return *ParseCluster(text, "test.pbtxt");
}

double RelativeDistance(const torch::Tensor& a, const torch::Tensor& b) {
  double scale = std::max(b.abs().max().item<double>(), 1e-12);
  return (a - b).abs().max().item<double>() / scale;
}

void ExpectMatchesPyTorch(const std::string& name, int opset, int devices) {
  SCOPED_TRACE(name + " opset " + std::to_string(opset) + " on " +
               std::to_string(devices) + " device(s)");
  const Expected expected =
      ReadExpected(name + ".op" + std::to_string(opset));
  ASSERT_FALSE(expected.grads.empty());
  absl::StatusOr<Graph> g = ImportOnnxFile(
      std::string(kDir) + name + ".op" + std::to_string(opset) + ".onnx", {});
  ASSERT_TRUE(g.ok()) << g.status();
  TrainingView view = BuildTrainingView(*g);
  Placement placement{std::vector<int>(g->ops().size(), 0)};
  int k = 0;  // round-robin: every edge between devices
  for (int op : g->topological_order()) {
    placement.device_of_op[op] = k++ % devices;
  }
  ExecutorOptions options;
  options.update.learning_rate = 0.5;
  options.update.momentum = 0;
  absl::StatusOr<std::unique_ptr<StrategyExecutor>> executor =
      StrategyExecutor::Create(view, Cpus(devices), placement, options);
  ASSERT_TRUE(executor.ok()) << executor.status();
  std::map<std::string, torch::Tensor> before;
  for (const auto& [param, grad] : expected.grads) {
    absl::StatusOr<torch::Tensor> w = (*executor)->Resident(param);
    ASSERT_TRUE(w.ok()) << w.status();
    before[param] = *w;
  }
  absl::StatusOr<StepReport> step = (*executor)->Step();
  ASSERT_TRUE(step.ok()) << step.status();
  EXPECT_NEAR(step->loss, expected.loss, 1e-9 * std::abs(expected.loss));
  for (const auto& [param, grad] : expected.grads) {
    SCOPED_TRACE(param);
    torch::Tensor after = *(*executor)->Resident(param);
    ASSERT_EQ(after.scalar_type(), torch::kDouble);
    // SGD without momentum: w1 = w0 - lr * g.
    torch::Tensor measured = (before[param] - after).reshape(-1) / 0.5;
    torch::Tensor want = torch::tensor(grad, torch::kDouble);
    ASSERT_EQ(measured.numel(), want.numel());
    EXPECT_LT(RelativeDistance(measured, want), 1e-6);
  }
  for (const auto& [buffer, values] : expected.states) {
    SCOPED_TRACE(buffer);
    absl::StatusOr<torch::Tensor> state = (*executor)->Resident(buffer);
    ASSERT_TRUE(state.ok()) << state.status();
    // ONNX stores momentum as float32: 0.9f makes the update's weight
    // 1 - 0.9f = 0.10000002, 2.4e-7 away from PyTorch's 0.1.
    EXPECT_LT(RelativeDistance(state->reshape(-1),
                               torch::tensor(values, torch::kDouble)),
              1e-6);
  }
}

class TorchNumericsTest
    : public ::testing::TestWithParam<std::tuple<std::string, int>> {};

TEST_P(TorchNumericsTest, OneDeviceAndTwoMatchPyTorch) {
  const auto& [name, opset] = GetParam();
  ExpectMatchesPyTorch(name, opset, 1);
  ExpectMatchesPyTorch(name, opset, 2);
}

INSTANTIATE_TEST_SUITE_P(
    Models, TorchNumericsTest,
    ::testing::Combine(::testing::Values("bn_cnn", "mobilenet", "lstm",
                                         "transformer"),
                       ::testing::Values(13, 17)));

// The models of today, with their loss in the graph
// (tests/fixtures/corpus/modern_models.py): a Llama-style decoder, its
// mixture-of-experts variant, a diffusion UNet, a BERT encoder with an int64
// attention mask.
INSTANTIATE_TEST_SUITE_P(
    ModelsOfToday, TorchNumericsTest,
    ::testing::Combine(::testing::Values("llama", "llama_moe", "unet",
                                         "bert_masked"),
                       ::testing::Values(14, 17)));

}  // namespace
}  // namespace placer
