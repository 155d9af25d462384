// ZeRO-3 gathers a parameter once per pass, however many ops read it
// (FSDP gathers a module's parameters for its whole forward), on a
// hand-computed case.
#include <memory>
#include <string>
#include <vector>

#include "graph/onnx_import.h"
#include "graph/training_view.h"
#include "gtest/gtest.h"
#include "profiles/cluster.h"
#include "simulator/simulator.h"
#include "simulator/strategy.h"
#include "simulator/strategy_simulator.h"
#include "tests/graph/test_models.h"
#include "tests/simulator/constant_costs.h"

namespace placer {
namespace {

// x -> A (MatMul w) -> B (MatMul w) -> output, every tensor [4, 4] (64
// bytes): one weight read by both MatMuls.
Graph SharedWeight() {
  onnx::ModelProto m = testing::EmptyModel();
  auto* g = m.mutable_graph();
  testing::AddInput(g, "x", {4, 4});
  testing::AddWeight(g, "w", {4, 4});
  testing::AddNode(g, "MatMul", "A", {"x", "w"}, {"a"});
  testing::AddNode(g, "MatMul", "B", {"a", "w"}, {"y"});
  testing::AddOutput(g, "y");
  absl::StatusOr<Graph> graph = ImportOnnxModel(m, "shared", {});
  EXPECT_TRUE(graph.ok()) << graph.status();
  return *std::move(graph);
}

// Two replicas of one micro-batch each, f = 1 s, b = 2 s per node: the
// forward gathers w once before A (one ring step of 32 bytes, G), B reads
// it still held: G + 2; the backward likewise (its first node to read w
// gathers it): G + 4. Wire bytes: one all-gather of 64 bytes per pass.
TEST(ZeroThreeTest, AWeightReadTwiceIsGatheredOncePerPass) {
  ExactFixture f(SharedWeight(), ConstantCosts(1, 2, 0.5, 1e-3, 1e6), 2);
  Strategy s;
  s.stage_of_op = {0, 0};
  s.stages = {PipelineStage::OneDevicePerReplica({0, 1})};
  s.micro_batches = 2;
  s.zero = ZeroStage::kParameters;
  absl::StatusOr<StrategySimulation> r = SimulateStrategy(f.context, s);
  ASSERT_TRUE(r.ok()) << r.status();
  int backward_readers = 0;
  for (const TrainingNode& n : f.view.nodes()) {
    if (n.kind != NodeKind::kBackward) continue;
    for (int v : n.inputs) {
      backward_readers += f.view.value(v).kind == ValueKind::kParameter;
    }
  }
  ASSERT_GE(backward_readers, 1);
  const double g = 1e-3 + 32 / 1e6;
  const double reduce_scatter = 1e-3 + 32 / 1e6;  // w's 64-byte gradient
  EXPECT_NEAR(r->step.step_seconds,
              (g + 2) + (g + 4) + reduce_scatter + 0.5 / 2, 1e-12);
  // One gather per pass of 64 bytes ((p - 1) x 64), the reduce-scatter.
  EXPECT_EQ(r->step.bytes_moved, 2 * 64 + 64);
}

}  // namespace
}  // namespace placer
