// Selective recomputation (Recompute::kSelective, kSelectiveOp) on
// hand-computed cases (a fake cost model of constant costs).
//
// The model, an attention core in miniature: x [8, 2] -> A (MatMul w1) ->
// a [8, 2]; T (Transpose a) -> t [2, 8]; Q (MatMul a t) -> q [8, 8];
// P (Softmax) -> p [8, 8]; B (MatMul p w2) -> y [8, 2]. The backward reads
// x, a, t and p (64 + 64 + 64 + 256 bytes). Recomputing selectively, a
// stage keeps what A makes (a) and the graph input x, 128 bytes, and
// reruns T, Q and P (they read no weight) before its backward; wholly, it
// keeps x alone and reruns all five.
#include "simulator/selective_recompute.h"

#include <memory>
#include <string>
#include <vector>

#include "graph/onnx_import.h"
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

Graph Model() {
  onnx::ModelProto m = testing::EmptyModel();
  auto* g = m.mutable_graph();
  testing::AddInput(g, "x", {8, 2});
  testing::AddWeight(g, "w1", {2, 2});
  testing::AddWeight(g, "w2", {8, 2});
  testing::AddNode(g, "MatMul", "A", {"x", "w1"}, {"a"});
  testing::AddNode(g, "Transpose", "T", {"a"}, {"t"});
  testing::AddNode(g, "MatMul", "Q", {"a", "t"}, {"q"});
  testing::AddNode(g, "Softmax", "P", {"q"}, {"p"});
  testing::AddNode(g, "MatMul", "B", {"p", "w2"}, {"y"});
  testing::AddOutput(g, "y");
  absl::StatusOr<Graph> graph = ImportOnnxModel(m, "selective", {});
  EXPECT_TRUE(graph.ok()) << graph.status();
  return *std::move(graph);
}

// One stage on one device, GPipe over 4 micro-batches (all 4 in flight);
// f = 1 s per forward node, b = 2 per backward node, updates 0.5: a step
// is 4 x (5 + 10) + 2 x 0.5 = 61 s, plus the reruns (3 or 5 s per
// micro-batch). Each micro-batch in flight holds what it keeps: 448 bytes
// (none), 128 (selective), 64 (full). The fourth's backward rebuilds what
// it did not keep: full its whole stash (448 - 64 = 384 bytes); selective
// p (256 bytes), which B's backward reads first, and what P's rerun then
// brings along, Q's and so T's: t (64), held until Q's backward has read
// it: 320 at once. So selective peaks 4 x 320 - 320 below none, and
// 4 x 64 - (384 - 320) above full.
TEST(SelectiveRecomputeTest, RerunsTheOpsWithoutWeightsAndKeepsTheRest) {
  ExactFixture f(Model(), ConstantCosts(1, 2, 0.5, 1e-3, 1e6), 2);
  Strategy s;
  s.stage_of_op = {0, 0, 0, 0, 0};
  s.stages = {PipelineStage::OneDevicePerReplica({0})};
  s.micro_batches = 4;
  s.schedule = PipelineSchedule::kGPipe;
  std::vector<StrategySimulation> runs;
  for (Recompute r :
       {Recompute::kNone, Recompute::kSelective, Recompute::kFull}) {
    s.stages[0].recompute = r;
    absl::StatusOr<StrategySimulation> sim = SimulateStrategy(f.context, s);
    ASSERT_TRUE(sim.ok()) << sim.status();
    runs.push_back(*sim);
  }
  EXPECT_DOUBLE_EQ(runs[0].step.step_seconds, 61);
  EXPECT_DOUBLE_EQ(runs[1].step.step_seconds, 61 + 4 * 3);
  EXPECT_DOUBLE_EQ(runs[2].step.step_seconds, 61 + 4 * 5);
  EXPECT_EQ(
      runs[0].step.peak_memory_bytes[0] - runs[1].step.peak_memory_bytes[0],
      4 * 320 - 320);
  EXPECT_EQ(
      runs[1].step.peak_memory_bytes[0] - runs[2].step.peak_memory_bytes[0],
      4 * 64 - (384 - 320));
  s.stages[0].recompute = Recompute::kSelective;
  EXPECT_EQ(DescribeStrategy(s),
            "1 stage x 1 replicas, 4 micro-batches, gpipe, ring, selective "
            "recompute");

  // Through the placement file.
  const std::string json =
      StrategyToJson(s, f.graph, f.cluster, PlacementInfo{}, 1.0);
  EXPECT_NE(json.find("\"recompute\": \"selective\""), std::string::npos)
      << json;
  absl::StatusOr<PlacementOrStrategy> read =
      ParsePlacementOrStrategyJson(json, "s.json", f.graph, f.cluster);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->strategy->stages[0].recompute, Recompute::kSelective);

  // Not with ops placed inside the stage.
  Strategy wide = s;
  wide.stages = {PipelineStage::OfReplicas({{0, 1}})};
  wide.stages[0].recompute = Recompute::kSelective;
  wide.slot_of_op = {0, 0, 1, 1, 1};
  absl::StatusOr<StrategySimulation> refused =
      SimulateStrategy(f.context, wide);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find(
                "selective recomputation with ops placed inside stage 0"),
            std::string::npos)
      << refused.status();
}

// Two repeated blocks (graph/repeated_layers.h) between a stem and a head:
// x [8, 2] -> S (MatMul wS) -> h0; per block l: A (MatMul h wA) -> a,
// R (Relu) -> r, B (MatMul r wB) -> b, C (MatMul b wC) -> c,
// D (Add c h) -> the next h; O (MatMul h2 wO) -> y. Every value is 64
// bytes. Kept without recomputation: what the backward reads, x, h0, h1,
// h2 and each block's r and b: 512 bytes.
Graph Blocks() {
  onnx::ModelProto m = testing::EmptyModel();
  auto* g = m.mutable_graph();
  testing::AddInput(g, "x", {8, 2});
  testing::AddWeight(g, "wS", {2, 2});
  testing::AddWeight(g, "wO", {2, 2});
  testing::AddNode(g, "MatMul", "S", {"x", "wS"}, {"h0"});
  for (const std::string l : {"1", "2"}) {
    const std::string in = l == "1" ? "h0" : "h1";
    for (const char* w : {"wA", "wB", "wC"}) {
      testing::AddWeight(g, w + l, {2, 2});
    }
    testing::AddNode(g, "MatMul", "A" + l, {in, "wA" + l}, {"a" + l});
    testing::AddNode(g, "Relu", "R" + l, {"a" + l}, {"r" + l});
    testing::AddNode(g, "MatMul", "B" + l, {"r" + l, "wB" + l}, {"b" + l});
    testing::AddNode(g, "MatMul", "C" + l, {"b" + l, "wC" + l}, {"c" + l});
    testing::AddNode(g, "Add", "D" + l, {"c" + l, in}, {l == "1" ? "h1" : "h2"});
  }
  testing::AddNode(g, "MatMul", "O", {"h2", "wO"}, {"y"});
  testing::AddOutput(g, "y");
  absl::StatusOr<Graph> graph = ImportOnnxModel(m, "blocks", {});
  EXPECT_TRUE(graph.ok()) << graph.status();
  return *std::move(graph);
}

// torchtitan's op-level policy: in each block the first and third products
// (A, C) are kept, the second (B) rerun with R; D makes the block's output
// (the next block's input) and is kept. So a micro-batch keeps x, h0, a1,
// h1, a2 and h2 (384 bytes: the products' outputs are kept whether the
// backward reads them or not, as torch's policy saves them) and reruns 4
// nodes (1 s each) before its backward. Weights are 16 bytes (with
// momentum, 256 in all). A micro-batch's own timeline lets r and b go once
// its forward has read them and makes a block's again as the block's
// backward starts (grad:D's); it peaks as grad:D2 starts, at 912 bytes:
// the weights 256; x, h0 and h1, 192; a1 and a2, which the reruns read,
// 128; grad:O's dh2 and dwO, 80; r2 and b2 rebuilt, 128; grad:D2's dc2
// and dh1, 128. That is 272 beyond the weights and what it keeps; without
// recomputation it peaks at 928 as grad:C2 starts, 160 beyond the weights
// and its 512-byte stash. GPipe over 4 micro-batches on one device: 4 x
// (12 + 24) + 8 x 0.5 = 148 s without recomputation, 4 x 4 s more with
// it; the peak (four in flight, the last one's rest) 4 x (512 - 384) +
// 160 - 272 = 400 bytes lower.
// By layer, a layer's rerun runs at the first backward node of its ops:
// with layers {A, T} and {Q, P, B} (and a third with no node), the
// backward runs grad:B, grad:P, grad:Q, grad:T, grad:A, so the second
// layer reruns at position 0 and the first at 3.
TEST(SelectiveRecomputeTest, ALayerRerunsAtItsFirstBackwardNode) {
  const Graph graph = Model();
  const TrainingView view = BuildTrainingView(graph);
  std::vector<int> backward;
  std::vector<std::string> keys;
  for (int n : view.topological_order()) {
    if (view.node(n).kind != NodeKind::kBackward) continue;
    backward.push_back(n);
    keys.push_back(view.node(n).key);
  }
  ASSERT_EQ(keys, (std::vector<std::string>{"grad:B", "grad:P", "grad:Q",
                                            "grad:T", "grad:A"}));
  RepeatedLayers layers;
  layers.count = 3;
  layers.layer_of_node.assign(view.nodes().size(), -1);
  for (int n = 0; n < static_cast<int>(view.nodes().size()); ++n) {
    if (view.node(n).kind != NodeKind::kForward) continue;
    const std::string& key = view.node(n).key;
    layers.layer_of_node[n] = key == "A" || key == "T" ? 0 : 1;
  }
  EXPECT_EQ(LayerRerunPositions(view, layers, backward),
            (std::vector<int>{3, 0, -1}));
  // A stage's backward in part: where its first node of a layer falls.
  EXPECT_EQ(LayerRerunPositions(view, layers, {backward[3], backward[4]}),
            (std::vector<int>{0, -1, -1}));
}

TEST(SelectiveRecomputeTest, OpLevelKeepsEveryOtherProductOfEachLayer) {
  ExactFixture f(Blocks(), ConstantCosts(1, 2, 0.5, 1e-3, 1e6), 2);
  Strategy s;
  s.stage_of_op.assign(12, 0);
  s.stages = {PipelineStage::OneDevicePerReplica({0})};
  s.micro_batches = 4;
  s.schedule = PipelineSchedule::kGPipe;
  std::vector<StrategySimulation> runs;
  for (Recompute r : {Recompute::kNone, Recompute::kSelectiveOp}) {
    s.stages[0].recompute = r;
    absl::StatusOr<StrategySimulation> sim = SimulateStrategy(f.context, s);
    ASSERT_TRUE(sim.ok()) << sim.status();
    runs.push_back(*sim);
  }
  EXPECT_DOUBLE_EQ(runs[0].step.step_seconds, 148);
  EXPECT_DOUBLE_EQ(runs[1].step.step_seconds, 148 + 4 * 4);
  EXPECT_EQ(
      runs[0].step.peak_memory_bytes[0] - runs[1].step.peak_memory_bytes[0],
      4 * (512 - 384) + 160 - 272);
  EXPECT_EQ(DescribeStrategy(s),
            "1 stage x 1 replicas, 4 micro-batches, gpipe, ring, op-level "
            "selective recompute");
  const std::string json =
      StrategyToJson(s, f.graph, f.cluster, PlacementInfo{}, 1.0);
  EXPECT_NE(json.find("\"recompute\": \"selective-op\""), std::string::npos)
      << json;
  absl::StatusOr<PlacementOrStrategy> read =
      ParsePlacementOrStrategyJson(json, "s.json", f.graph, f.cluster);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->strategy->stages[0].recompute, Recompute::kSelectiveOp);

  // Layer by layer whole (kLayers): each block keeps its input and output
  // only (x, h0, h1, h2: 256 bytes) and reruns A, R, B and C (8 nodes, 1 s
  // each); it rebuilds r and b as kSelectiveOp does (a is read by no
  // backward node, c by none either: D's backward keeps nothing). A
  // micro-batch peaks as grad:C2 starts, at 800 bytes: the weights 256;
  // x, h0 and h1, 192; dwO 16; r2 and b2, 128; dc2 and dh1, 128; grad:C2's
  // db2 and dwC2, 80: 288 beyond the weights and what it keeps.
  s.stages[0].recompute = Recompute::kLayers;
  absl::StatusOr<StrategySimulation> layers = SimulateStrategy(f.context, s);
  ASSERT_TRUE(layers.ok()) << layers.status();
  EXPECT_DOUBLE_EQ(layers->step.step_seconds, 148 + 4 * 8);
  EXPECT_EQ(
      runs[0].step.peak_memory_bytes[0] - layers->step.peak_memory_bytes[0],
      4 * (512 - 256) + 160 - 288);
  EXPECT_EQ(DescribeStrategy(s),
            "1 stage x 1 replicas, 4 micro-batches, gpipe, ring, recompute "
            "by layer");

  // A model without repeated layers has nothing to rerun so.
  ExactFixture plain(Model(), ConstantCosts(1, 2, 0.5, 1e-3, 1e6), 2);
  Strategy one;
  one.stage_of_op = {0, 0, 0, 0, 0};
  one.stages = {PipelineStage::OneDevicePerReplica({0})};
  one.stages[0].recompute = Recompute::kSelectiveOp;
  absl::StatusOr<StrategySimulation> refused =
      SimulateStrategy(plain.context, one);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("has none"), std::string::npos)
      << refused.status();
  one.stages[0].recompute = Recompute::kLayers;
  refused = SimulateStrategy(plain.context, one);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("has none"), std::string::npos)
      << refused.status();
}

}  // namespace
}  // namespace placer
