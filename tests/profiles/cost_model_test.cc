#include "profiles/cost_model.h"

#include "graph/onnx_import.h"
#include "graph/training_view.h"
#include "gtest/gtest.h"
#include "profiles/cluster.h"
#include "zoo/zoo.h"

namespace placer {
namespace {

// The roofline runs a node's fp8 casts at the device's achieved memory
// rate, beside its own max(compute, memory) time: the same node under
// torchao's recipe and Transformer Engine's (whose casts are not counted)
// differs by exactly the casts' bytes over that rate.
TEST(RooflineCostModelTest, Fp8CastsRunAtTheMemoryRateBesideTheProduct) {
  zoo::ZooParams p;
  p.layers = 1;
  p.hidden = 64;
  p.heads = 4;
  p.seq_len = 16;
  p.vocab = 128;
  p.batch_size = 2;
  absl::StatusOr<onnx::ModelProto> model = zoo::BuildZooModel("gpt", p);
  ASSERT_TRUE(model.ok()) << model.status();
  absl::StatusOr<Graph> graph = ImportOnnxModel(*model, "zoo:gpt", {});
  ASSERT_TRUE(graph.ok()) << graph.status();
  TrainingOptions options;
  options.precision = Precision::kFp8;
  options.fp8_recipe = Fp8Recipe::kTorchao;
  const TrainingView current = BuildTrainingView(*graph, options);
  options.fp8_recipe = Fp8Recipe::kTransformerEngine;
  const TrainingView te = BuildTrainingView(*graph, options);
  Device device;
  device.peak_flops = 1e12;
  device.bf16_peak_flops = 8e12;
  device.fp8_peak_flops = 1.6e13;
  device.memory_bandwidth = 1e11;
  device.memory_fraction = 0.5;
  device.op_overhead_seconds = 1e-6;
  std::unique_ptr<CostModel> costs = NewRooflineCostModel();
  int products = 0;
  for (int i = 0; i < static_cast<int>(current.nodes().size()); ++i) {
    const TrainingNode& n = current.node(i);
    const double difference = costs->NodeSeconds(current, i, device) -
                              costs->NodeSeconds(te, i, device);
    EXPECT_EQ(te.node(i).fp8_cast_bytes, 0) << n.key;
    EXPECT_NEAR(difference, static_cast<double>(n.fp8_cast_bytes) / 5e10,
                1e-15)
        << n.key;
    if (n.compute_precision != Precision::kFp8) {
      EXPECT_EQ(n.fp8_cast_bytes, 0) << n.key;
      continue;
    }
    ++products;
    EXPECT_GT(n.fp8_cast_bytes, 0) << n.key;
    const double alone = device.op_overhead_seconds +
        std::max(n.cost.flops / device.AchievedFlops(Precision::kFp8, false),
                 static_cast<double>(n.cost.bytes_accessed) / 5e10);
    EXPECT_NEAR(costs->NodeSeconds(current, i, device),
                alone + static_cast<double>(n.fp8_cast_bytes) / 5e10, 1e-15)
        << n.key;
  }
  // The layer's q, k, v, output, and two MLP products, forward and
  // backward (the output layer stays at bf16).
  EXPECT_GE(products, 8);
}

}  // namespace
}  // namespace placer
