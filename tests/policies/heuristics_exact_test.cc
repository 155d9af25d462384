// The heuristics on a 4-op diamond under a fake cost model with constant
// costs (FlexFlow's and Grappler's style: the estimator is an interface,
// so a test can hand the policies exact numbers and check exact answers).
//
//   x -> A = MatMul(x, W1) -> B = MatMul(A, W2), C = MatMul(A, W3)
//     -> D = Add(B, C)
//
// (B and C carry weights of their own: the list schedulers keep a layer,
// the ops around one weight, on one device, so parameter-free branches
// would stay with A.)
// Every forward and backward node costs 1 s, updates 0 s; a transfer costs
// `transfer_seconds` whatever its size. On one device a step is the 8
// nodes in a row: 8 s. On two devices with free transfers, B and C (and
// their backward nodes) run side by side: A, {B, C}, D, D', {B', C'}, A'
// = 6 s, the critical path. With 10 s transfers any split costs at least
// one 10 s crossing on the critical path, so one device (8 s) is best.
#include <memory>
#include <string>

#include "gtest/gtest.h"
#include "graph/onnx_import.h"
#include "graph/training_view.h"
#include "policies/policy.h"
#include "profiles/cluster.h"
#include "profiles/cost_model.h"
#include "simulator/simulator.h"
#include "tests/graph/test_models.h"

namespace placer {
namespace {

class ConstantCosts : public CostModel {
 public:
  explicit ConstantCosts(double transfer_seconds)
      : transfer_seconds_(transfer_seconds) {}
  double NodeSeconds(const TrainingView& view, int node,
                     const Device&) const override {
    return view.node(node).kind == NodeKind::kUpdate ? 0.0 : 1.0;
  }
  double TransferSeconds(int64_t, const Cluster&, int, int) const override {
    return transfer_seconds_;
  }
  bool IsGuess(const TrainingView&, int) const override { return false; }
  double AccumulateSeconds(const TrainingView&, int,
                           const Device&) const override {
    return 0;
  }

 private:
  double transfer_seconds_;
};

Graph Diamond() {
  onnx::ModelProto m = testing::EmptyModel();
  auto* g = m.mutable_graph();
  testing::AddInput(g, "x", {4, 4});
  testing::AddWeight(g, "w1", {4, 4});
  testing::AddWeight(g, "w2", {4, 4});
  testing::AddWeight(g, "w3", {4, 4});
  testing::AddNode(g, "MatMul", "A", {"x", "w1"}, {"a"});
  testing::AddNode(g, "MatMul", "B", {"a", "w2"}, {"b"});
  testing::AddNode(g, "MatMul", "C", {"a", "w3"}, {"c"});
  testing::AddNode(g, "Add", "D", {"b", "c"}, {"d"});
  testing::AddOutput(g, "d");
  absl::StatusOr<Graph> graph = ImportOnnxModel(m, "diamond", {});
  EXPECT_TRUE(graph.ok()) << graph.status();
  return *std::move(graph);
}

Cluster TwoDevices() {
  absl::StatusOr<Cluster> c = ParseCluster(
      "name: \"two\"\n"
      "devices { name: \"/d:0\" kind: GPU peak_flops: 1e12 "
      "memory_bandwidth: 1e11 memory_bytes: 1000000000 }\n"
      "devices { name: \"/d:1\" kind: GPU peak_flops: 1e12 "
      "memory_bandwidth: 1e11 memory_bytes: 1000000000 }\n"
      "default_link { latency_seconds: 1e-6 bandwidth: 1e10 }\n",
      "two.pbtxt");
  EXPECT_TRUE(c.ok()) << c.status();
  return *c;
}

struct Outcome {
  double step_seconds = -1;
  bool b_and_c_apart = false;
};

Outcome PlaceAndSimulate(const std::string& policy, double transfer_seconds) {
  Graph graph = Diamond();
  TrainingView view = BuildTrainingView(graph);
  Cluster cluster = TwoDevices();
  ConstantCosts costs(transfer_seconds);
  std::unique_ptr<ReadyOrder> order = NewCriticalPathReadyOrder();
  SimulationContext context =
      SimulationContext::Create(view, cluster, costs, *order);
  PolicyInput input{view, cluster, costs, context};
  absl::StatusOr<std::unique_ptr<PlacementPolicy>> p = NewPolicy(policy);
  EXPECT_TRUE(p.ok()) << p.status();
  PolicyOptions options;
  options.max_evaluations = 200;  // searches: machine-independent
  absl::StatusOr<Placement> placement = (*p)->Place(input, options);
  EXPECT_TRUE(placement.ok()) << policy << ": " << placement.status();
  if (!placement.ok()) return {};
  absl::StatusOr<SimulationResult> r = Simulate(context, *placement);
  EXPECT_TRUE(r.ok()) << r.status();
  Outcome out;
  out.step_seconds = r.ok() ? r->step_seconds : -1;
  out.b_and_c_apart = placement->device_of_op[graph.FindOp("B")] !=
                      placement->device_of_op[graph.FindOp("C")];
  return out;
}

TEST(HeuristicsExactTest, TheDiamondsViewHasEightTimedNodes) {
  Graph graph = Diamond();
  TrainingView view = BuildTrainingView(graph);
  int forward = 0, backward = 0, update = 0;
  for (const TrainingNode& n : view.nodes()) {
    forward += n.kind == NodeKind::kForward;
    backward += n.kind == NodeKind::kBackward;
    update += n.kind == NodeKind::kUpdate;
  }
  EXPECT_EQ(forward, 4);
  EXPECT_EQ(backward, 4);
  EXPECT_EQ(update, 3);  // W1's, W2's, W3's
  EXPECT_DOUBLE_EQ(PlaceAndSimulate("single", 0).step_seconds, 8.0);
}

TEST(HeuristicsExactTest, FreeTransfersSplitTheBranches) {
  // The list schedulers see that C finishes a second earlier on the idle
  // device; so does the search.
  for (const char* policy : {"heft", "m_etf", "m_sct", "local_search", "best"}) {
    SCOPED_TRACE(policy);
    Outcome o = PlaceAndSimulate(policy, 0.0);
    EXPECT_DOUBLE_EQ(o.step_seconds, 6.0);
    EXPECT_TRUE(o.b_and_c_apart);
  }
}

TEST(HeuristicsExactTest, DearTransfersKeepOneDevice) {
  for (const char* policy : {"heft", "m_etf", "m_sct", "local_search", "best"}) {
    SCOPED_TRACE(policy);
    Outcome o = PlaceAndSimulate(policy, 10.0);
    EXPECT_DOUBLE_EQ(o.step_seconds, 8.0);
    EXPECT_FALSE(o.b_and_c_apart);
  }
}

}  // namespace
}  // namespace placer
