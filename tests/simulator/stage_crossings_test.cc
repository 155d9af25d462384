// What crosses stages (StageCrossings), checked by hand on a graph with a
// skip connection, where one value is read by two later stages and one
// gradient's partials come from two stages:
//   x -> A(w1) -> a;  a -> B(w2) -> b;  C: c = a + b;  c -> D(w3) -> d,
// every tensor [4, 4] (64 bytes), stages A | B | C D.
#include "simulator/stage_crossings.h"

#include <string>
#include <utility>
#include <vector>

#include "graph/onnx_import.h"
#include "graph/training_view.h"
#include "gtest/gtest.h"
#include "profiles/cluster.h"
#include "simulator/strategy.h"
#include "tests/graph/test_models.h"

namespace placer {
namespace {

using ::placer::testing::AddInput;
using ::placer::testing::AddNode;
using ::placer::testing::AddOutput;
using ::placer::testing::AddWeight;
using ::placer::testing::EmptyModel;

Graph SkipGraph() {
  onnx::ModelProto m = EmptyModel();
  auto* g = m.mutable_graph();
  AddInput(g, "x", {4, 4});
  AddWeight(g, "w1", {4, 4});
  AddWeight(g, "w2", {4, 4});
  AddWeight(g, "w3", {4, 4});
  AddNode(g, "MatMul", "A", {"x", "w1"}, {"a"});
  AddNode(g, "MatMul", "B", {"a", "w2"}, {"b"});
  AddNode(g, "Add", "C", {"a", "b"}, {"c"});
  AddNode(g, "MatMul", "D", {"c", "w3"}, {"d"});
  AddOutput(g, "d");
  absl::StatusOr<Graph> graph = ImportOnnxModel(m, "skip", {});
  EXPECT_TRUE(graph.ok()) << graph.status();
  return *std::move(graph);
}

Strategy ThreeStages() {
  Strategy s;
  s.stage_of_op = {0, 1, 2, 2};
  s.stages = {PipelineStage::OneDevicePerReplica({0}),
              PipelineStage::OneDevicePerReplica({1}),
              PipelineStage::OneDevicePerReplica({2})};
  s.micro_batches = 2;
  return s;
}

// The activation named `name`.
int Activation(const TrainingView& view, const std::string& name) {
  for (int v = 0; v < static_cast<int>(view.values().size()); ++v) {
    if (view.value(v).kind == ValueKind::kActivation &&
        view.value(v).name == name) {
      return v;
    }
  }
  ADD_FAILURE() << "no activation " << name;
  return -1;
}

// The gradient sum of the tensor that activation `v` holds.
int SumOf(const TrainingView& view, int v) {
  for (int s = 0; s < static_cast<int>(view.gradient_sums().size()); ++s) {
    if (view.gradient_sums()[s].tensor == view.value(v).tensor) return s;
  }
  ADD_FAILURE() << "no gradient sum of " << view.value(v).name;
  return -1;
}

TEST(StageCrossingsTest, SkipConnectionByHand) {
  const Graph graph = SkipGraph();
  const TrainingView view = BuildTrainingView(graph);
  const Strategy strategy = ThreeStages();
  const absl::StatusOr<Cluster> cluster = LoadCluster("p100x4");
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  ASSERT_TRUE(CheckStrategy(view, *cluster, strategy).ok());
  const StageCrossings crossings(view, strategy);
  ASSERT_EQ(crossings.num_stages(), 3);
  const int a = Activation(view, "a");
  const int b = Activation(view, "b");
  const int c = Activation(view, "c");
  ASSERT_GE(c, 0);

  // a goes to both later stages, once each; b to the last; c and d stay.
  EXPECT_EQ(crossings.values(0, 1), std::vector<int>{a});
  EXPECT_EQ(crossings.values(0, 2), std::vector<int>{a});
  EXPECT_EQ(crossings.values(1, 2), std::vector<int>{b});
  for (int s = 0; s < 3; ++s) {
    EXPECT_TRUE(crossings.values(s, s).empty()) << s;
    EXPECT_TRUE(crossings.values(2, s).empty()) << s;
    EXPECT_TRUE(crossings.values(1, s == 2 ? 0 : s).empty()) << s;
  }
  EXPECT_EQ(crossings.value_bytes(0, 1), 64);
  EXPECT_EQ(crossings.value_bytes(0, 2), 64);
  EXPECT_EQ(crossings.value_bytes(1, 2), 64);
  EXPECT_EQ(crossings.value_bytes(2, 0), 0);
  EXPECT_EQ(crossings.value_sources(0), std::vector<int>{});
  EXPECT_EQ(crossings.value_sources(1), std::vector<int>{0});
  EXPECT_EQ(crossings.value_sources(2), (std::vector<int>{0, 1}));

  // a's gradient has partials from B's backward (stage 1) and C's (stage
  // 2), summed in A's (stage 0); b's comes back from C's to B's.
  const int sum_a = SumOf(view, a);
  const int sum_b = SumOf(view, b);
  EXPECT_EQ(crossings.sums(1, 0), std::vector<int>{sum_a});
  EXPECT_EQ(crossings.sums(2, 0), std::vector<int>{sum_a});
  EXPECT_EQ(crossings.sums(2, 1), std::vector<int>{sum_b});
  EXPECT_TRUE(crossings.sums(0, 1).empty());
  EXPECT_TRUE(crossings.sums(0, 2).empty());
  EXPECT_TRUE(crossings.sums(1, 2).empty());
  EXPECT_EQ(crossings.sum_bytes(1, 0), 64);
  EXPECT_EQ(crossings.sum_bytes(2, 0), 64);
  EXPECT_EQ(crossings.sum_bytes(2, 1), 64);
  EXPECT_EQ(crossings.sum_sources(0), (std::vector<int>{1, 2}));
  EXPECT_EQ(crossings.sum_sources(1), std::vector<int>{2});
  EXPECT_EQ(crossings.sum_sources(2), std::vector<int>{});
}

TEST(StageCrossingsTest, OneStageCrossesNothing) {
  const Graph graph = SkipGraph();
  const TrainingView view = BuildTrainingView(graph);
  Strategy strategy;
  strategy.stage_of_op = {0, 0, 0, 0};
  strategy.stages = {PipelineStage::OneDevicePerReplica({0})};
  const absl::StatusOr<Cluster> cluster = LoadCluster("p100x4");
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  ASSERT_TRUE(CheckStrategy(view, *cluster, strategy).ok());
  const StageCrossings crossings(view, strategy);
  EXPECT_TRUE(crossings.values(0, 0).empty());
  EXPECT_TRUE(crossings.sums(0, 0).empty());
  EXPECT_EQ(crossings.value_bytes(0, 0), 0);
  EXPECT_TRUE(crossings.value_sources(0).empty());
  EXPECT_TRUE(crossings.sum_sources(0).empty());
  EXPECT_EQ(StageCrossings().num_stages(), 0);
}

}  // namespace
}  // namespace placer
