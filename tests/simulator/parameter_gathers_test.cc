// ZeRO-3's gathers in a pass (PlanPassGathers), checked by hand on
//   x -> A: MatMul(x, w1) -> a;  B: Add(a, bias) -> c;
//   C: Transpose(w2) -> t;  D: MatMul(c, t) -> d;  E: MatMul(d, w1) -> e.
// Forward: w1 is gathered before A and let go after E (its second
// reader); bias and w2 are gathered and let go at their one reader. The
// backward reads what each op keeps (graph/saved_for_backward.h): a
// MatMul each operand for the other's gradient, the Add and the Transpose
// nothing. x gets no gradient, so A keeps x (for w1's) and not w1: only w1
// is gathered there, before E's backward, and let go after it.
//
// Recomputed by layer (GatherAtLayerReruns), on
//   x -> P: MatMul(x, w0) -> h;  A: MatMul(h, w1) -> a;  B: Add(a, bias) -> c
// with A and B a layer that reruns before its first backward node
// (grad:B): the backward runs grad:B, grad:A (keeps h and w1), grad:P
// (keeps x). The rerun reads w1 and bias, so both are gathered before
// grad:B; w1 stays until grad:A, its reader; bias, which no backward node
// reads, is let go after the rerun.
#include "simulator/parameter_gathers.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "graph/onnx_import.h"
#include "graph/repeated_layers.h"
#include "graph/training_view.h"
#include "gtest/gtest.h"
#include "tests/graph/test_models.h"

namespace placer {
namespace {

using ::placer::testing::AddInput;
using ::placer::testing::AddNode;
using ::placer::testing::AddOutput;
using ::placer::testing::AddWeight;
using ::placer::testing::EmptyModel;

Graph BiasAndTransposedWeight() {
  onnx::ModelProto m = EmptyModel();
  auto* g = m.mutable_graph();
  AddInput(g, "x", {4, 4});
  AddWeight(g, "w1", {4, 4});
  AddWeight(g, "bias", {4});
  AddWeight(g, "w2", {4, 4});
  AddNode(g, "MatMul", "A", {"x", "w1"}, {"a"});
  AddNode(g, "Add", "B", {"a", "bias"}, {"c"});
  AddNode(g, "Transpose", "C", {"w2"}, {"t"});
  AddNode(g, "MatMul", "D", {"c", "t"}, {"d"});
  AddNode(g, "MatMul", "E", {"d", "w1"}, {"e"});
  AddOutput(g, "e");
  absl::StatusOr<Graph> graph = ImportOnnxModel(m, "gathers", {});
  EXPECT_TRUE(graph.ok()) << graph.status();
  return *std::move(graph);
}

// The parameter named `name`.
int Parameter(const TrainingView& view, const std::string& name) {
  for (int v = 0; v < static_cast<int>(view.values().size()); ++v) {
    if (view.value(v).kind == ValueKind::kParameter &&
        view.value(v).name == name) {
      return v;
    }
  }
  ADD_FAILURE() << "no parameter " << name;
  return -1;
}

// The pass's nodes of `kind`, in the view's order, and their keys.
std::vector<int> Pass(const TrainingView& view, NodeKind kind,
                      std::vector<std::string>* keys) {
  std::vector<int> nodes;
  for (int n : view.topological_order()) {
    if (view.node(n).kind != kind) continue;
    nodes.push_back(n);
    keys->push_back(view.node(n).key);
  }
  return nodes;
}

TEST(ParameterGathersTest, ForwardGathersAtFirstReaderAndLetsGoAfterLast) {
  const Graph graph = BiasAndTransposedWeight();
  const TrainingView view = BuildTrainingView(graph);
  const int w1 = Parameter(view, "w1"), bias = Parameter(view, "bias"),
            w2 = Parameter(view, "w2");
  std::vector<std::string> keys;
  const std::vector<int> forward = Pass(view, NodeKind::kForward, &keys);
  ASSERT_EQ(keys, (std::vector<std::string>{"A", "B", "C", "D", "E"}));
  const PassGathers gathers = PlanPassGathers(view, forward);
  using Lists = std::vector<std::vector<int>>;
  EXPECT_EQ(gathers.first_read, (Lists{{w1}, {bias}, {w2}, {}, {}}));
  EXPECT_EQ(gathers.last_read, (Lists{{}, {bias}, {w2}, {}, {w1}}));
}

TEST(ParameterGathersTest, BackwardGathersOnlyWhatTheOpsKeep) {
  const Graph graph = BiasAndTransposedWeight();
  const TrainingView view = BuildTrainingView(graph);
  const int w1 = Parameter(view, "w1");
  std::vector<std::string> keys;
  const std::vector<int> backward = Pass(view, NodeKind::kBackward, &keys);
  ASSERT_EQ(keys, (std::vector<std::string>{"grad:E", "grad:D", "grad:C",
                                            "grad:B", "grad:A"}));
  const PassGathers gathers = PlanPassGathers(view, backward);
  using Lists = std::vector<std::vector<int>>;
  EXPECT_EQ(gathers.first_read, (Lists{{w1}, {}, {}, {}, {}}));
  EXPECT_EQ(gathers.last_read, (Lists{{w1}, {}, {}, {}, {}}));
}

Graph LayerAfterProduct() {
  onnx::ModelProto m = EmptyModel();
  auto* g = m.mutable_graph();
  AddInput(g, "x", {4, 4});
  AddWeight(g, "w0", {4, 4});
  AddWeight(g, "w1", {4, 4});
  AddWeight(g, "bias", {4});
  AddNode(g, "MatMul", "P", {"x", "w0"}, {"h"});
  AddNode(g, "MatMul", "A", {"h", "w1"}, {"a"});
  AddNode(g, "Add", "B", {"a", "bias"}, {"c"});
  AddOutput(g, "c");
  absl::StatusOr<Graph> graph = ImportOnnxModel(m, "layer", {});
  EXPECT_TRUE(graph.ok()) << graph.status();
  return *std::move(graph);
}

TEST(ParameterGathersTest, ALayersRerunGathersWhatItReadsBeforeItRuns) {
  const Graph graph = LayerAfterProduct();
  const TrainingView view = BuildTrainingView(graph);
  const int w1 = Parameter(view, "w1"), bias = Parameter(view, "bias");
  std::vector<std::string> forward_keys, backward_keys;
  const std::vector<int> forward =
      Pass(view, NodeKind::kForward, &forward_keys);
  const std::vector<int> backward =
      Pass(view, NodeKind::kBackward, &backward_keys);
  ASSERT_EQ(forward_keys, (std::vector<std::string>{"P", "A", "B"}));
  ASSERT_EQ(backward_keys,
            (std::vector<std::string>{"grad:B", "grad:A", "grad:P"}));
  // P outside any layer; A and B layer 0, rerun, before grad:B.
  RepeatedLayers layers;
  layers.count = 1;
  layers.layer_of_node.assign(view.nodes().size(), -1);
  std::vector<char> rerun(view.nodes().size(), 0);
  for (int n : {forward[1], forward[2]}) {
    layers.layer_of_node[n] = 0;
    rerun[n] = 1;
  }
  PassGathers gathers = PlanPassGathers(view, backward);
  using Lists = std::vector<std::vector<int>>;
  ASSERT_EQ(gathers.first_read, (Lists{{}, {w1}, {}}));
  GatherAtLayerReruns(view, layers, rerun, forward, /*layer_start=*/{0},
                      &gathers);
  Lists both = {{w1, bias}, {}, {}};
  std::sort(both[0].begin(), both[0].end());
  EXPECT_EQ(gathers.first_read, both);
  EXPECT_EQ(gathers.last_read, (Lists{{bias}, {w1}, {}}));
  // Without a rerun position nothing moves.
  PassGathers unmoved = PlanPassGathers(view, backward);
  GatherAtLayerReruns(view, layers, rerun, forward, /*layer_start=*/{-1},
                      &unmoved);
  EXPECT_EQ(unmoved.first_read, (Lists{{}, {w1}, {}}));
  EXPECT_EQ(unmoved.last_read, (Lists{{}, {w1}, {}}));
}

}  // namespace
}  // namespace placer
