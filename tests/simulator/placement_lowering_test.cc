// The task graph an op placement lowers to, on a hand-drawn diamond:
//   x -> a -> b -> d,  a -> c -> d  (Relu, Relu, Relu, Add; no loss, so
// forward nodes only), with c on device 1 and the rest on device 0.
#include "simulator/placement_lowering.h"

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "graph/onnx_import.h"
#include "graph/training_view.h"
#include "gtest/gtest.h"
#include "profiles/cluster.h"
#include "profiles/cost_model.h"
#include "simulator/engine.h"
#include "simulator/memory_timeline.h"
#include "tests/graph/test_models.h"

namespace placer {
namespace {

Graph Diamond() {
  onnx::ModelProto m = testing::EmptyModel();
  auto* g = m.mutable_graph();
  testing::AddInput(g, "x", {1, 1000});
  testing::AddNode(g, "Relu", "a", {"x"}, {"a"});
  testing::AddNode(g, "Relu", "b", {"a"}, {"b"});
  testing::AddNode(g, "Relu", "c", {"a"}, {"c"});
  testing::AddNode(g, "Add", "d", {"b", "c"}, {"d"});
  testing::AddOutput(g, "d");
  absl::StatusOr<Graph> graph = ImportOnnxModel(m, "diamond", {});
  EXPECT_TRUE(graph.ok()) << graph.status();
  return *std::move(graph);
}

Cluster TwoDevices() {
  absl::StatusOr<Cluster> c = ParseCluster(
      "name: \"two\"\n"
      "devices { name: \"/d:0\" kind: CPU peak_flops: 1000 "
      "memory_bandwidth: 1e30 memory_bytes: 1000000000 }\n"
      "devices { name: \"/d:1\" kind: CPU peak_flops: 1000 "
      "memory_bandwidth: 1e30 memory_bytes: 1000000000 }\n"
      "default_link { bandwidth: 4000 }\n",
      "two.pbtxt");
  EXPECT_TRUE(c.ok()) << c.status();
  return *c;
}

struct Fixture {
  Fixture()
      : graph(Diamond()),
        view(BuildTrainingView(graph)),
        cluster(TwoDevices()),
        costs(NewRooflineCostModel()),
        order(NewTopologicalReadyOrder()),
        context(SimulationContext::Create(view, cluster, *costs, *order)) {}
  int Node(const std::string& key) const {
    for (int n = 0; n < static_cast<int>(view.nodes().size()); ++n) {
      if (view.node(n).key == key) return n;
    }
    ADD_FAILURE() << "no node " << key;
    return -1;
  }
  Placement COnDeviceOne() const {
    Placement p;
    p.device_of_op.assign(graph.ops().size(), 0);
    p.device_of_op[graph.FindOp("c")] = 1;
    return p;
  }
  Graph graph;
  TrainingView view;
  Cluster cluster;
  std::unique_ptr<CostModel> costs;
  std::unique_ptr<ReadyOrder> order;
  SimulationContext context;
};

// The successors of `task`, in edge order.
std::vector<int> Successors(const TaskGraph& graph, int task) {
  std::vector<int> out;
  for (const TaskEdge& edge : graph.edges()) {
    if (edge.from == task) out.push_back(edge.to);
  }
  return out;
}

TEST(PlacementLoweringTest, NodesOnTheirDevicesCopiesOnTheirLinks) {
  Fixture f;
  ASSERT_EQ(f.view.nodes().size(), 4u);  // no loss: forward nodes only
  const LoweredPlacement lowered = LowerPlacement(f.context, f.COnDeviceOne());
  const TaskGraph& g = lowered.graph;
  const int a = f.Node("a"), b = f.Node("b"), c = f.Node("c"), d = f.Node("d");
  // Four nodes, then two copies: a to device 1, c back to device 0.
  ASSERT_EQ(g.num_tasks(), 6);
  ASSERT_EQ(lowered.copies.size(), 2u);
  EXPECT_EQ(g.resource(c), 1);
  EXPECT_EQ(g.resource(a), 0);
  EXPECT_EQ(g.resource(d), 0);
  // A Relu on 1000 floats at 1000 FLOP/s: 1 s.
  EXPECT_DOUBLE_EQ(g.seconds(a), 1.0);
  const int copy_a = 4, copy_c = 5;
  EXPECT_EQ(lowered.copy(copy_a).src, 0);
  EXPECT_EQ(lowered.copy(copy_a).dst, 1);
  EXPECT_EQ(lowered.copy(copy_a).bytes, 4000);
  EXPECT_EQ(lowered.copy(copy_c).src, 1);
  EXPECT_EQ(lowered.copy(copy_c).dst, 0);
  // 4000 bytes at 4000 bytes/s.
  EXPECT_DOUBLE_EQ(g.seconds(copy_a), 1.0);
  // Two devices, then one resource per link direction used, FIFO.
  ASSERT_EQ(g.num_resources(), 4);
  EXPECT_EQ(g.resource_order(0), ResourceOrder::kPriority);
  EXPECT_EQ(g.resource_order(g.resource(copy_a)), ResourceOrder::kArrival);
  EXPECT_NE(g.resource(copy_a), g.resource(copy_c));
  // Edges: a feeds b on its device and its copy; the copies feed their
  // readers; d waits for b and c's copy.
  EXPECT_EQ(Successors(g, a), (std::vector<int>{b, copy_a}));
  EXPECT_EQ(Successors(g, copy_a), (std::vector<int>{c}));
  EXPECT_EQ(Successors(g, c), (std::vector<int>{copy_c}));
  EXPECT_EQ(Successors(g, copy_c), (std::vector<int>{d}));
  EXPECT_EQ(g.num_predecessors(d), 2);
  EXPECT_EQ(g.num_predecessors(a), 0);  // x is on device 0 from the start
}

TEST(PlacementLoweringTest, TheEngineRunsTheLoweredDiamond) {
  // a [0,1]; b [1,2]; a -> dev1 [1,2]; c [2,3]; c -> dev0 [3,4]; d [4,5].
  Fixture f;
  const LoweredPlacement lowered = LowerPlacement(f.context, f.COnDeviceOne());
  const TaskSchedule s = RunTaskGraph(lowered.graph);
  EXPECT_EQ(s.finished, 6);
  EXPECT_DOUBLE_EQ(s.start_seconds[f.Node("c")], 2.0);
  EXPECT_DOUBLE_EQ(s.start_seconds[f.Node("d")], 4.0);
  EXPECT_DOUBLE_EQ(s.makespan_seconds, 5.0);
  EXPECT_EQ(s.waited_for[f.Node("d")], 5);  // c's copy
}

// What the executor lets go, and when: each value on each device once,
// after its last reader or outgoing copy there (the schedule above).
TEST(PlacementLoweringTest, TheTimelineReportsEachValueWhereItDies) {
  Fixture f;
  const LoweredPlacement lowered = LowerPlacement(f.context, f.COnDeviceOne());
  MemoryTimeline memory(f.context, lowered, MemoryTimelineOptions());
  std::vector<ValueOnDevice> freed;
  memory.ReportFreedValues(&freed);
  RunTaskGraph(lowered.graph, &memory);
  auto value = [&](const std::string& name) {
    for (int v = 0; v < static_cast<int>(f.view.values().size()); ++v) {
      if (f.view.value(v).name == name) return v;
    }
    ADD_FAILURE() << "no value " << name;
    return -1;
  };
  std::vector<std::pair<int, int>> got;
  for (const ValueOnDevice& x : freed) got.emplace_back(x.value, x.device);
  const std::vector<std::pair<int, int>> expected = {
      {value("x"), 0},                   // a ends at 1
      {value("a"), 0},                   // at 2, b and a's copy done
      {value("a"), 1},                   // c ends at 3
      {value("c"), 1},                   // its copy ends at 4
      {value("b"), 0},                   // d ends at 5: its inputs,
      {value("c"), 0}, {value("d"), 0},  // and its output, which nobody reads
  };
  EXPECT_EQ(got, expected);
  for (int d = 0; d < 2; ++d) EXPECT_EQ(memory.bytes(d), 0) << d;
}

}  // namespace
}  // namespace placer
