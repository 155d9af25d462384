// The task graph an op placement lowers to, on a hand-drawn diamond:
//   x -> a -> b -> d,  a -> c -> d  (Relu, Relu, Relu, Add; no loss, so
// forward nodes only), with c on device 1 and the rest on device 0.
#include "simulator/placement_lowering.h"

#include <algorithm>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "graph/onnx_import.h"
#include "graph/training_view.h"
#include "gtest/gtest.h"
#include "profiles/cluster.h"
#include "profiles/cost_model.h"
#include "simulator/engine.h"
#include "simulator/memory_timeline.h"
#include "simulator/strategy.h"
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

// Calls test(graph, view, cluster, context) on PyTorch's training-mode
// exports of the corpus, each on four P100s (roofline costs), under a
// SCOPED_TRACE naming the file.
template <typename Test>
void ForEachCorpusExport(Test&& test) {
  absl::StatusOr<Cluster> cluster = LoadCluster("p100x4");
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  const std::unique_ptr<CostModel> costs = NewRooflineCostModel();
  const std::unique_ptr<ReadyOrder> order = NewTopologicalReadyOrder();
  for (const char* file :
       {"bert_tiny.train.op13", "gpt2.train.op17", "llama.train.op17",
        "llama_moe.train.op17", "lstm.train.op13", "convnext_tiny.train.op13",
        "densenet121.train.op17"}) {
    SCOPED_TRACE(file);
    absl::StatusOr<Graph> graph = ImportOnnxFile(
        std::string("tests/fixtures/corpus/") + file + ".onnx", {});
    ASSERT_TRUE(graph.ok()) << graph.status();
    const TrainingView view = BuildTrainingView(*graph);
    const SimulationContext context =
        SimulationContext::Create(view, *cluster, *costs, *order);
    test(*graph, view, *cluster, context);
  }
}

// What the lowering copies between devices is what crosses between the
// slots of the placement as its strategy (StrategyOfPlacement;
// WideStageCopies, the rule the executor and a wide stage's simulation
// follow): the same values, weights and summed gradient buffers between
// the same devices, each once. The lowering makes its copies as it walks
// the nodes (it is on every search's path); this holds the two equal on
// PyTorch's training-mode exports under random placements over four
// devices.
TEST(PlacementLoweringTest, CopiesAreWhatCrossesThePlacementAsAStrategy) {
  ForEachCorpusExport([](const Graph& graph, const TrainingView& view,
                         const Cluster&, const SimulationContext& context) {
    std::mt19937 rng(7);
    for (int trial = 0; trial < 3; ++trial) {
      Placement placement;
      for (size_t op = 0; op < graph.ops().size(); ++op) {
        placement.device_of_op.push_back(static_cast<int>(rng() % 4));
      }
      // (value or -1, gradient sum or -1, from device, to device)
      using Crossing = std::tuple<int, int, int, int>;
      std::vector<Crossing> lowered, crossing;
      const LoweredPlacement lowering = LowerPlacement(context, placement);
      for (const CopyTask& copy : lowering.copies) {
        lowered.emplace_back(copy.gradient_sum >= 0 ? -1 : copy.value,
                             copy.gradient_sum, copy.src, copy.dst);
      }
      const Strategy strategy = StrategyOfPlacement(placement);
      const PipelineStage& stage = strategy.stages[0];
      const std::vector<std::vector<SlotCopy>> copies =
          WideStageCopies(view, strategy);
      for (const SlotCopy& copy : copies[0]) {
        crossing.emplace_back(copy.value, copy.sum,
                              stage.device(0, copy.from_slot),
                              stage.device(0, copy.to_slot));
      }
      std::sort(lowered.begin(), lowered.end());
      std::sort(crossing.begin(), crossing.end());
      EXPECT_GT(lowered.size(), 100u);
      EXPECT_EQ(lowered, crossing) << "trial " << trial;
    }
  });
}

// A wide stage's pass lowered by the same walk (LowerStagePass, what the
// strategy simulator's wide tasks run) copies what WideStageCopies says
// crosses the stage's slots: on PyTorch's training-mode exports cut into
// two pipeline stages of two slots each (ops dealt to slots at random),
// each stage's forward and backward copies together are its slot copies,
// each copy waits for the nodes that make it (`made_by`) and releases the
// nodes that read it in the pass (`readers`; none for a buffer an update
// reads), and each node waits, itself or through copies, for its
// TaskDependencies.
TEST(PlacementLoweringTest, AStagePassCopiesWhatCrossesItsSlots) {
  ForEachCorpusExport([](const Graph& graph, const TrainingView& view,
                         const Cluster& cluster,
                         const SimulationContext& context) {
    std::mt19937 rng(11);
    Strategy strategy;
    const int ops = static_cast<int>(graph.ops().size());
    for (int op = 0; op < ops; ++op) {
      strategy.stage_of_op.push_back(op < ops / 2 ? 0 : 1);
      strategy.slot_of_op.push_back(static_cast<int>(rng() % 2));
    }
    strategy.stages = {PipelineStage::OfReplicas({{0, 1}}),
                       PipelineStage::OfReplicas({{2, 3}})};
    ASSERT_TRUE(CheckStrategy(view, cluster, strategy).ok());
    std::vector<int> slot_of_node;
    for (const TrainingNode& node : view.nodes()) {
      slot_of_node.push_back(strategy.slot_of_op[node.forward_op]);
    }
    // (value or -1, gradient sum or -1, from slot, to slot, made by,
    // read by)
    using Crossing =
        std::tuple<int, int, int, int, std::vector<int>, std::vector<int>>;
    const std::vector<std::vector<SlotCopy>> copies =
        WideStageCopies(view, strategy);
    for (int stage = 0; stage < 2; ++stage) {
      std::vector<Crossing> lowered, crossing;
      for (bool backward : {false, true}) {
        std::vector<int> nodes;
        for (int n = 0; n < static_cast<int>(view.nodes().size()); ++n) {
          const TrainingNode& node = view.node(n);
          if (strategy.stage_of_op[node.forward_op] == stage &&
              node.kind ==
                  (backward ? NodeKind::kBackward : NodeKind::kForward)) {
            nodes.push_back(n);
          }
        }
        const LoweredPlacement pass = LowerStagePass(
            context, strategy, stage, backward, nodes, slot_of_node);
        ASSERT_EQ(pass.first_copy, static_cast<int>(nodes.size()));
        std::vector<std::vector<int>> made_by(pass.copies.size()),
            read_by(pass.copies.size());
        for (const TaskEdge& edge : pass.graph.edges()) {
          if (pass.is_copy(edge.to)) {
            made_by[edge.to - pass.first_copy].push_back(nodes[edge.from]);
          } else if (pass.is_copy(edge.from)) {
            read_by[edge.from - pass.first_copy].push_back(nodes[edge.to]);
          }
        }
        // What each node waits for, itself or through a copy, is its
        // TaskDependencies.
        std::vector<std::vector<int>> waits(nodes.size());
        for (const TaskEdge& edge : pass.graph.edges()) {
          if (!pass.is_node(edge.to)) continue;
          if (pass.is_node(edge.from)) {
            waits[edge.to].push_back(nodes[edge.from]);
          } else {
            const std::vector<int>& made = made_by[edge.from - pass.first_copy];
            waits[edge.to].insert(waits[edge.to].end(), made.begin(),
                                  made.end());
          }
        }
        for (size_t k = 0; k < nodes.size(); ++k) {
          std::sort(waits[k].begin(), waits[k].end());
          waits[k].erase(std::unique(waits[k].begin(), waits[k].end()),
                         waits[k].end());
          EXPECT_EQ(waits[k], TaskDependencies(view, strategy, nodes[k]))
              << view.node(nodes[k]).key;
        }
        for (size_t k = 0; k < pass.copies.size(); ++k) {
          const CopyTask& copy = pass.copies[k];
          std::sort(made_by[k].begin(), made_by[k].end());
          std::sort(read_by[k].begin(), read_by[k].end());
          lowered.emplace_back(copy.gradient_sum >= 0 ? -1 : copy.value,
                               copy.gradient_sum, copy.src, copy.dst,
                               made_by[k], read_by[k]);
        }
      }
      for (const SlotCopy& copy : copies[stage]) {
        std::vector<int> made_by = copy.made_by, read_by;
        if (!copy.to_update) read_by = copy.readers;
        std::sort(made_by.begin(), made_by.end());
        std::sort(read_by.begin(), read_by.end());
        crossing.emplace_back(copy.value, copy.sum, copy.from_slot,
                              copy.to_slot, made_by, read_by);
      }
      std::sort(lowered.begin(), lowered.end());
      std::sort(crossing.begin(), crossing.end());
      EXPECT_GT(lowered.size(), 10u) << "stage " << stage;
      EXPECT_EQ(lowered, crossing) << "stage " << stage;
    }
  });
}

}  // namespace
}  // namespace placer
