// A weight read on two slots of a wide stage: the other slot's buffer of
// its partial gradients goes to the update's slot once made, on the link
// (simulator/strategy.h: WideStageCopies), in the strategy simulator's
// wide pass as in the op placement's lowering. Hand-computed with
// constant costs.
#include <string>
#include <utility>

#include "graph/onnx_import.h"
#include "graph/training_view.h"
#include "gtest/gtest.h"
#include "simulator/simulator.h"
#include "simulator/strategy.h"
#include "simulator/strategy_simulator.h"
#include "tests/graph/test_models.h"
#include "tests/simulator/constant_costs.h"

namespace placer {
namespace {

// x [4, 4] -> a = x W (an output); x -> b = x W -> c = b V (an output);
// W and V [4, 4], every tensor 64 bytes. W's first reader, a, is its home.
Graph TwoReadersOfOneWeight() {
  onnx::ModelProto m = testing::EmptyModel();
  auto* g = m.mutable_graph();
  testing::AddInput(g, "x", {4, 4});
  testing::AddWeight(g, "W", {4, 4});
  testing::AddWeight(g, "V", {4, 4});
  testing::AddNode(g, "MatMul", "a", {"x", "W"}, {"ya"});
  testing::AddNode(g, "MatMul", "b", {"x", "W"}, {"yb"});
  testing::AddNode(g, "MatMul", "c", {"yb", "V"}, {"yc"});
  testing::AddOutput(g, "ya");
  testing::AddOutput(g, "yc");
  absl::StatusOr<Graph> graph = ImportOnnxModel(m, "two_readers", {});
  EXPECT_TRUE(graph.ok()) << graph.status();
  return *std::move(graph);
}

// a on device 0, b and c on device 1; forward 1 s, backward 2 s, updates
// 0.5 s, a copy x = 1 ms + 64 B / 1 MB/s.
//   Forward: a [0, 1] on 0; W copied to 1 [0, x], b [x, 1 + x], c [.., 2 + x].
//   Backward: grad:a (W's partial) on 0; grad:c [.., +2], then grad:b (W's
//   partial on 1) [.., +2]: device 1's buffer of W leaves when grad:b ends
//   and arrives x later, after the backward has ended on both devices.
//   Updates: V's on 1 once the backward ends; W's on 0 once the buffer has
//   arrived (added into the one device 0 holds, free here): + x + 0.5.
// The strategy's passes: forward 2 + x, backward 4, W's update after
// 4 + x: 6.5 + 2x. The op placement's engine starts grad:a at 1 (its
// seed is ready then) and grad:c at 2 + x: the backward ends at 6 + x,
// the buffer arrives at 6 + 2x: the same 6.5 + 2x. (Were the buffer added
// at the end of the backward without its copy: 6.5 + x. Were additions
// charged, they would part: the wide pass charges this one to grad:a, the
// slot's own partial, where the op placement's engine charges it once
// the buffer has arrived, before the update.)
TEST(WideUpdateTest, AnotherSlotsBufferOfAWeightsGradientIsCopiedToItsUpdate) {
  ExactFixture f(TwoReadersOfOneWeight(), ConstantCosts(1, 2, 0.5, 1e-3, 1e6),
                 2);
  const Placement split{{0, 1, 1}};
  const double x = 1e-3 + 64 / 1e6;
  StrategySimulation wide = f.Run(StrategyOfPlacement(split));
  EXPECT_NEAR(wide.step.step_seconds, 6.5 + 2 * x, 1e-12);
  SimulationOptions record;
  record.record_schedule = true;
  absl::StatusOr<SimulationResult> op = Simulate(f.context, split, record);
  ASSERT_TRUE(op.ok()) << op.status();
  EXPECT_NEAR(op->step_seconds, 6.5 + 2 * x, 1e-12);
  // The copies: W to device 1, and device 1's buffer of its gradient back.
  ASSERT_EQ(op->transfers.size(), 2u);
  EXPECT_EQ(op->transfers[1].gradient_sum >= 0, true);
  EXPECT_EQ(op->transfers[1].src, 1);
  EXPECT_NEAR(op->transfers[1].end_seconds, 6 + 2 * x, 1e-12);
}

}  // namespace
}  // namespace placer
