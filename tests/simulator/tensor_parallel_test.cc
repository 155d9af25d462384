// Tensor parallelism in the strategy simulator, hand-computed (a fake cost
// model of constant costs; FlexFlow's style).
//
// The model: x -> P (Add b0) -> R (Relu) -> A (MatMul w1) -> G (Relu) ->
// B (MatMul w2) -> output, x [4, 8], b0 [8], w1 and w2 [8, 8]: every
// activation 128 bytes, each weight 256. Split over two devices, A takes
// w1's columns and B its rows (Megatron-LM's MLP): P and R run whole, A, G
// and B half each; B's partial output is allreduced forward; R's output,
// whose gradient A makes partial, is allreduced backward.
#include <memory>
#include <string>
#include <vector>

#include "graph/onnx_import.h"
#include "graph/tensor_sharding.h"
#include "graph/training_view.h"
#include "gtest/gtest.h"
#include "profiles/cluster.h"
#include "simulator/placement_file.h"
#include "simulator/simulator.h"
#include "simulator/strategy.h"
#include "simulator/strategy_simulator.h"
#include "tests/graph/test_models.h"
#include "tests/simulator/constant_costs.h"

namespace placer {
namespace {

Graph Mlp() {
  onnx::ModelProto m = testing::EmptyModel();
  auto* g = m.mutable_graph();
  testing::AddInput(g, "x", {4, 8});
  testing::AddWeight(g, "b0", {8});
  testing::AddWeight(g, "w1", {8, 8});
  testing::AddWeight(g, "w2", {8, 8});
  testing::AddNode(g, "Add", "P", {"x", "b0"}, {"p"});
  testing::AddNode(g, "Relu", "R", {"p"}, {"r"});
  testing::AddNode(g, "MatMul", "A", {"r", "w1"}, {"a"});
  testing::AddNode(g, "Relu", "G", {"a"}, {"g"});
  testing::AddNode(g, "MatMul", "B", {"g", "w2"}, {"y"});
  testing::AddOutput(g, "y");
  absl::StatusOr<Graph> graph = ImportOnnxModel(m, "mlp", {});
  EXPECT_TRUE(graph.ok()) << graph.status();
  return *std::move(graph);
}

// The MLP on `devices` flat devices.
struct Fixture : ExactFixture {
  explicit Fixture(const ConstantCosts& c, int devices = 4)
      : ExactFixture(Mlp(), c, devices) {}
};

Strategy OneStage(std::vector<std::vector<int>> groups, int micro_batches) {
  Strategy s;
  s.stage_of_op = {0, 0, 0, 0, 0};
  s.stages = {PipelineStage::OfTensorGroups(groups)};
  s.micro_batches = micro_batches;
  return s;
}

// One allreduce of 128 bytes over two devices: a ring's 2 steps of 64.
constexpr double kAllreduce = 2 * (1e-3 + 64 / 1e6);

TEST(TensorParallelTest, ColumnThenRowHalvesComputeWithOneAllreduceEachWay) {
  // f = 1 s per forward node, b = 2 per backward node, updates 0.5.
  Fixture f(ConstantCosts(1, 2, 0.5, 1e-3, 1e6));
  const Strategy s = OneStage({{0, 1}}, 1);
  absl::StatusOr<TensorSharding> sharding = ShardStrategy(f.graph, s);
  ASSERT_TRUE(sharding.ok()) << sharding.status();
  EXPECT_EQ(OpShardingName(sharding->op[f.graph.FindOp("P")]), "replicated");
  EXPECT_EQ(OpShardingName(sharding->op[f.graph.FindOp("R")]), "replicated");
  EXPECT_EQ(OpShardingName(sharding->op[f.graph.FindOp("A")]), "out:1");
  EXPECT_EQ(OpShardingName(sharding->op[f.graph.FindOp("G")]), "out:1");
  EXPECT_EQ(OpShardingName(sharding->op[f.graph.FindOp("B")]), "contracted");
  ASSERT_EQ(sharding->collectives.size(), 2u);
  for (const GroupCollective& c : sharding->collectives) {
    EXPECT_EQ(c.kind, Collective::kAllreduce);
    EXPECT_EQ(c.bytes, 128);
  }
  EXPECT_NE(sharding->collectives[0].backward,
            sharding->collectives[1].backward);

  const StrategySimulation r = f.Run(s);
  int backward_nodes = 0;
  for (const TrainingNode& n : f.view.nodes()) {
    backward_nodes += n.kind == NodeKind::kBackward;
  }
  ASSERT_EQ(backward_nodes, 5);
  // P and R whole, A, G, B half; b0's update whole, w1's and w2's half.
  const double forward = 2 + 3 * 0.5 + kAllreduce;
  const double backward = 2 * 2 + 3 * 2 / 2.0 + kAllreduce;
  const double updates = 0.5 + 2 * 0.5 / 2;
  EXPECT_NEAR(r.step.step_seconds, forward + backward + updates, 1e-12);
  EXPECT_NEAR(r.tensor_seconds, 2 * kAllreduce, 1e-12);
  // Two allreduces of 128 bytes over two devices: 2 (p - 1) x 128 each.
  EXPECT_EQ(r.step.bytes_moved, 2 * 2 * 128);
  // Both devices busy alike, each holding half of each weight.
  EXPECT_DOUBLE_EQ(r.step.busy_seconds[0], r.step.busy_seconds[1]);
  EXPECT_DOUBLE_EQ(r.step.busy_seconds[0], forward + backward + updates);
  EXPECT_EQ(r.step.peak_memory_bytes[0], r.step.peak_memory_bytes[1]);
  EXPECT_EQ(r.step.peak_memory_bytes[2], 0);

  // The same on one device: the whole weights' parameters and momentum
  // (2 x 512 bytes) where tensor parallelism holds half.
  Strategy whole = s;
  whole.stages = {PipelineStage::OneDevicePerReplica({0})};
  const StrategySimulation one = f.Run(whole);
  EXPECT_NEAR(one.step.step_seconds, 5 + 5 * 2 + 3 * 0.5, 1e-12);
  EXPECT_EQ(one.step.peak_memory_bytes[0] - r.step.peak_memory_bytes[0] >= 512,
            true)
      << one.step.peak_memory_bytes[0] << " " << r.step.peak_memory_bytes[0];
  EXPECT_EQ(DescribeStrategy(s),
            "1 stage x 1 replicas of tensor 2, 1 micro-batches, gpipe, ring");
}

// A device of a tensor-parallel group holds, at one micro-batch's peak,
// what the memory timeline counts over its shards (stage_plan.h). The
// MLP's peak is when R's backward starts. Whole, on one device: the
// weights and momentum (2 x 544 bytes), r (128, which R's backward reads)
// and the gradients of w2, w1 (256 each), r and p (128 each): 1984; as the
// strategy simulator breaks it down, what the step keeps for backward
// (256: r and g) and 640 beyond. Split over two: the weights and momentum
// 2 x 288 (b0 whole, w1 and w2 half), r whole (R runs replicated), w2's and
// w1's gradients half (128 each), r's whole (A's partial, allreduced) and
// p's whole (128 each): 576 + 128 + 512 = 1216; kept 192 (r whole, g
// half), 448 beyond. Scaling the whole peak's 640 by the stash's share
// (3/4, 480) said 1248; scaling its gradients by the weights' share (288 /
// 544, 338) said 1106, missing that r's and p's gradients are whole.
TEST(TensorParallelTest, AGroupsPeakIsTheTimelineOverItsShards) {
  Fixture f(ConstantCosts(1, 2, 0.5, 1e-3, 1e6));
  Strategy whole = OneStage({{0}}, 1);
  whole.stages = {PipelineStage::OneDevicePerReplica({0})};
  const StrategySimulation one = f.Run(whole);
  const MemoryBreakdown& a = one.step.peak_breakdown[0];
  EXPECT_EQ(a.parameters, 2 * 544);
  EXPECT_EQ(a.activations, 256);
  EXPECT_EQ(a.workspace, 640);
  EXPECT_EQ(one.step.peak_memory_bytes[0], 1984);
  const StrategySimulation two = f.Run(OneStage({{0, 1}}, 1));
  for (int d : {0, 1}) {
    const MemoryBreakdown& b = two.step.peak_breakdown[d];
    EXPECT_EQ(b.parameters, 2 * 288) << d;
    EXPECT_EQ(b.activations, 192) << d;
    EXPECT_EQ(b.workspace, 448) << d;
    EXPECT_EQ(two.step.peak_memory_bytes[d], 576 + 128 + 4 * 128) << d;
  }
}

// Tensor 2 x data 2 on four devices: each replica's group runs its
// micro-batch; the replicas allreduce each device's share of the gradients
// (b0's 32 bytes and half of w1's and w2's: 288, ring steps of 144), the
// two ranks' rings in parallel.
TEST(TensorParallelTest, DataParallelGroupsReduceEachDevicesShare) {
  Fixture f(ConstantCosts(1, 2, 0.5, 1e-3, 1e6));
  const StrategySimulation r = f.Run(OneStage({{0, 1}, {2, 3}}, 2));
  const double forward = 2 + 3 * 0.5 + kAllreduce;
  const double backward = 2 * 2 + 3 * 2 / 2.0 + kAllreduce;
  const double bucket = 2 * (1e-3 + 144 / 1e6);
  EXPECT_NEAR(r.step.step_seconds, forward + backward + bucket + 1.0, 1e-12);
  ASSERT_EQ(r.buckets.size(), 1u);
  EXPECT_EQ(r.buckets[0].bytes, 288);
  // Per micro-batch two tensor allreduces; two ranks each allreduce 288.
  EXPECT_EQ(r.step.bytes_moved, 2 * (2 * 2 * 128) + 2 * (2 * 288));
  for (int d = 1; d < 4; ++d) {
    EXPECT_EQ(r.step.peak_memory_bytes[d], r.step.peak_memory_bytes[0]) << d;
  }
}

// Recomputing a tensor-parallel stage reruns its forward, collectives too.
TEST(TensorParallelTest, RecomputationRerunsTheGroupsForward) {
  Fixture f(ConstantCosts(1, 2, 0.5, 1e-3, 1e6));
  Strategy s = OneStage({{0, 1}}, 1);
  s.stages[0].recompute = Recompute::kFull;
  const StrategySimulation r = f.Run(s);
  const double forward = 2 + 3 * 0.5 + kAllreduce;
  const double backward = 2 * 2 + 3 * 2 / 2.0 + kAllreduce;
  EXPECT_NEAR(r.step.step_seconds, 2 * forward + backward + 1.0, 1e-12);
  EXPECT_NEAR(r.tensor_seconds, 3 * kAllreduce, 1e-12);
}

// Recomputing layer by layer: the MLP's repeated layers
// (graph/repeated_layers.h) are (R, A) and (G, B), the same weight
// signature after a segment without one. A's output (the next layer's
// input) and B's (the graph's output) leave their layers and are kept;
// R (whole, 1 s) and G (half) are rerun, and the rerun pays the forward's
// collectives again, as full recomputation does: one allreduce. op-level selective recomputation is refused with
// tensor parallelism.
TEST(TensorParallelTest, RecomputationByLayerRerunsTheForwardsCollectives) {
  Fixture f(ConstantCosts(1, 2, 0.5, 1e-3, 1e6));
  Strategy s = OneStage({{0, 1}}, 1);
  s.stages[0].recompute = Recompute::kLayers;
  const StrategySimulation r = f.Run(s);
  const double forward = 2 + 3 * 0.5 + kAllreduce;
  const double backward = 2 * 2 + 3 * 2 / 2.0 + kAllreduce;
  const double rerun = 1 + 0.5 + kAllreduce;
  EXPECT_NEAR(r.step.step_seconds, forward + backward + 1.0 + rerun, 1e-12);
  EXPECT_NEAR(r.tensor_seconds, 3 * kAllreduce, 1e-12);
  s.stages[0].recompute = Recompute::kSelectiveOp;
  absl::StatusOr<StrategySimulation> refused = SimulateStrategy(f.context, s);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("tensor-parallel groups"),
            std::string::npos)
      << refused.status();
}

// Groups that do not match, a sharding an op cannot run, and the
// placement file's round trip.
TEST(TensorParallelTest, RoundTripsAndBadGroupsAreRefused) {
  Fixture f(ConstantCosts(1, 2, 0.5, 1e-3, 1e6));
  Strategy s = OneStage({{0, 1}, {2, 3}}, 2);
  const std::string json =
      StrategyToJson(s, f.graph, f.cluster, PlacementInfo{}, 1.0);
  absl::StatusOr<PlacementOrStrategy> read =
      ParsePlacementOrStrategyJson(json, "s.json", f.graph, f.cluster);
  ASSERT_TRUE(read.ok()) << read.status() << json;
  ASSERT_TRUE(read->strategy.has_value());
  EXPECT_EQ(read->strategy->stages[0].TensorGroup(1), (std::vector<int>{2, 3}));
  ASSERT_EQ(read->strategy->op_sharding.size(), 5u);
  EXPECT_EQ(OpShardingName(read->strategy->op_sharding[f.graph.FindOp("B")]),
            "contracted");
  EXPECT_NEAR(f.Run(*read->strategy).step.step_seconds,
              f.Run(s).step.step_seconds, 1e-12);

  Strategy uneven = s;
  uneven.stages[0].replicas[1].tensor_devices = {2};
  absl::StatusOr<StrategySimulation> r = SimulateStrategy(f.context, uneven);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("tensor-parallel group of 1 devices"),
            std::string::npos)
      << r.status();
  Strategy fixed = s;
  fixed.op_sharding.assign(5, OpSharding::Replicated());
  fixed.op_sharding[f.graph.FindOp("R")] = OpSharding::SplitOutput(3);
  r = SimulateStrategy(f.context, fixed);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("op R (Relu) cannot run out:3"),
            std::string::npos)
      << r.status();
}

}  // namespace
}  // namespace placer
