// The strategy simulator's stages over several devices per replica (op
// placement inside a stage) on hand-computed cases: how their slots run,
// allreduce, add partial gradients, and what is refused.
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "graph/onnx_import.h"
#include "gtest/gtest.h"
#include "simulator/placement_file.h"
#include "simulator/simulator.h"
#include "simulator/strategy.h"
#include "simulator/strategy_simulator.h"
#include "tests/graph/test_models.h"
#include "tests/simulator/constant_costs.h"
#include "tests/simulator/four_matmul_chain.h"

namespace placer {
namespace {

using Fixture = testing::ChainFixture;

TEST(StrategySimulatorTest, AStageOverTwoDevicesSchedulesItsNodesOnBoth) {
  Fixture f(ConstantCosts(1, 2, 0.5, 1e-3, 1e6));
  Strategy s;
  s.stage_of_op = {0, 0, 0, 0};
  s.slot_of_op = {0, 0, 1, 1};
  s.stages = {PipelineStage::OfReplicas({{0, 1}})};
  StrategySimulation r = f.Run(s);
  const double x = 1e-3 + 64 / 1e6;
  EXPECT_NEAR(r.step.step_seconds, 4 * 1 + 4 * 2 + 2 * x + 2 * 0.5, 1e-12);
  absl::StatusOr<SimulationResult> op =
      Simulate(f.context, Placement{{0, 0, 1, 1}});
  ASSERT_TRUE(op.ok());
  EXPECT_NEAR(r.step.step_seconds, op->step_seconds, 1e-12);
  // Device 0: A, B, A', B', 2 updates; device 1 likewise.
  EXPECT_NEAR(r.step.busy_seconds[0], 2 * 1 + 2 * 2 + 2 * 0.5, 1e-12);
  EXPECT_NEAR(r.step.busy_seconds[1], 2 * 1 + 2 * 2 + 2 * 0.5, 1e-12);
  EXPECT_NEAR(op->busy_seconds[0], r.step.busy_seconds[0], 1e-12);
  EXPECT_EQ(FirstReplicaPlacement(s).device_of_op,
            (std::vector<int>{0, 0, 1, 1}));
  EXPECT_EQ(DescribeStrategy(s),
            "1 stage x 1 replicas of 2 devices, 1 micro-batches, gpipe, ring");
}

// An op placement as its strategy (StrategyOfPlacement): one stage, one
// replica whose slots are the devices used, ascending; its first
// replica's placement is the op placement again. On the chain dealt
// {0, 1, 0, 1} every value crosses (x each, as above): the passes take
// 4 + 3x forward and 8 + 3x backward in both simulators, and both run the
// updates once the backward has ended (12 + 6x), each device's two one
// after the other: 13 + 6x. That is what PyTorch does (optimizer.step()
// after loss.backward()) and what the executor runs. (Were an update to
// run as soon as its gradient is final, as graph-mode dataflow does — w4
// at 6 + 3x, w3 at 8 + 4x, w2 at 10 + 5x on devices otherwise busy or
// idle — the step would end with w1's after A', at 12.5 + 6x.)
TEST(StrategySimulatorTest, AnOpPlacementAsAStrategyUpdatesAfterItsBackward) {
  Fixture f(ConstantCosts(1, 2, 0.5, 1e-3, 1e6));
  const Placement dealt{{0, 1, 0, 1}};
  const Strategy s = StrategyOfPlacement(dealt);
  EXPECT_EQ(s.slot_of_op, (std::vector<int>{0, 1, 0, 1}));
  ASSERT_EQ(s.stages.size(), 1u);
  ASSERT_EQ(s.stages[0].num_replicas(), 1);
  EXPECT_EQ(s.stages[0].replicas[0].device_of_slot, (std::vector<int>{0, 1}));
  EXPECT_EQ(s.micro_batches, 1);
  EXPECT_TRUE(CheckStrategy(f.view, f.cluster, s).ok());
  EXPECT_EQ(FirstReplicaPlacement(s).device_of_op, dealt.device_of_op);
  const double x = 1e-3 + 64 / 1e6;
  StrategySimulation r = f.Run(s);
  EXPECT_NEAR(r.step.step_seconds, 13 + 6 * x, 1e-12);
  absl::StatusOr<SimulationResult> op = Simulate(f.context, dealt);
  ASSERT_TRUE(op.ok());
  EXPECT_NEAR(op->step_seconds, 13 + 6 * x, 1e-12);
  // Devices used out of order, and one device alone.
  const Strategy sparse = StrategyOfPlacement(Placement{{3, 1, 3, 1}});
  EXPECT_EQ(sparse.stages[0].replicas[0].device_of_slot,
            (std::vector<int>{1, 3}));
  EXPECT_EQ(sparse.slot_of_op, (std::vector<int>{1, 0, 1, 0}));
  EXPECT_EQ(FirstReplicaPlacement(sparse).device_of_op,
            (std::vector<int>{3, 1, 3, 1}));
  const Strategy alone = StrategyOfPlacement(Placement{{2, 2, 2, 2}});
  EXPECT_EQ(alone.stages[0].width(), 1);
  EXPECT_NEAR(f.Run(alone).step.step_seconds, 4 * 1 + 4 * 2 + 4 * 0.5, 1e-12);
}

// x feeds B (slot 0, an output) and the chain A (slot 0) -> C -> D (slot 1,
// an output); the view's order is B, A, C, D. In a wide stage each slot
// runs its ready node with the lowest priority (the critical path's:
// A's path is the longer), as the op placement's engine does: slot 0 runs
// A before B, and in the backward B' (ready at once) while slot 1 runs D'
// and C'. Forward: A [0, 1], B [1, 2]; a is copied on the link
// [1, 1 + x], C [1 + x, 2 + x], D [2 + x, 3 + x]. Backward: D' [0, 2],
// C' [2, 4] on slot 1; B' [0, 2] on slot 0, C''s partial copied back
// [4, 4 + x], A' [4 + x, 6 + x]. Then each slot's two updates: 10 + 2x a
// step, the copies on the link, not in either device's busy time. (Run
// in the view's order instead, B before A and A' before B', it was 4 + x,
// 8 + x and 1: 13 + 2x.)
TEST(StrategySimulatorTest, AWideStagesSlotsRunTheirReadyNodesByPriority) {
  absl::StatusOr<Graph> graph =
      ImportOnnxModel(testing::ForkOfFourMatMuls(), "fork", {});
  ASSERT_TRUE(graph.ok()) << graph.status();
  ExactFixture f(*std::move(graph), ConstantCosts(1, 2, 0.5, 1e-3, 1e6), 2);
  ASSERT_EQ(f.view.node(f.view.topological_order()[0]).key, "B");
  Strategy s;
  s.stage_of_op = {0, 0, 0, 0};
  s.slot_of_op = {0, 0, 1, 1};  // B, A, C, D
  s.stages = {PipelineStage::OfReplicas({{0, 1}})};
  StrategySimulation r = f.Run(s);
  const double x = 1e-3 + 64 / 1e6;
  EXPECT_NEAR(r.step.step_seconds, 10 + 2 * x, 1e-12);
  EXPECT_NEAR(r.step.busy_seconds[0], 2 + 4 + 1, 1e-12);
  EXPECT_NEAR(r.step.busy_seconds[1], 1 + 1 + 4 + 1, 1e-12);
}

// Two such replicas (devices 0-1 and 2-3), two micro-batches: each
// replica runs one (4f + x, then 4b + x); slot 0's gradients (w1 by A',
// the last backward node) are allreduced between devices 0 and 2 once A'
// ends, 128 bytes on 2 devices: 2 (1 ms + 64 / 1e6); then slot 0's
// updates. Slot 1's (w3, w4 final after C') are reduced within the
// backward; its updates wait for the replica's task to end.
TEST(StrategySimulatorTest, EachSlotOfAWideStageAllreducesItsOwnGradients) {
  Fixture f(ConstantCosts(1, 2, 0.5, 1e-3, 1e6));
  Strategy s;
  s.stage_of_op = {0, 0, 0, 0};
  s.slot_of_op = {0, 0, 1, 1};
  s.stages = {PipelineStage::OfReplicas({{0, 1}, {2, 3}})};
  s.micro_batches = 2;
  SimulationOptions options;
  options.record_schedule = true;
  absl::StatusOr<StrategySimulation> r =
      SimulateStrategy(f.context, s, options);
  ASSERT_TRUE(r.ok()) << r.status();
  const double x = 1e-3 + 64 / 1e6;
  const double reduce = 2 * (1e-3 + 64 / 1e6);
  EXPECT_NEAR(r->step.step_seconds, 4 + x + 8 + x + reduce + 1, 1e-12);
  ASSERT_EQ(r->buckets.size(), 2u);
  EXPECT_EQ(r->buckets[0].slot, 0);
  EXPECT_EQ(r->buckets[0].bytes, 128);
  EXPECT_NEAR(r->buckets[0].start_seconds, 4 + x + 8 + x, 1e-12);
  EXPECT_EQ(r->buckets[1].slot, 1);
  EXPECT_NEAR(r->buckets[1].start_seconds, 4 + x + 4, 1e-12);
  EXPECT_NEAR(r->allreduce_seconds, 2 * reduce, 1e-12);
  EXPECT_EQ(StrategyDevices(s), 4);
  for (int d = 0; d < 4; ++d) EXPECT_EQ(r->most_in_flight[d], 1) << d;
}

// A wide stage after a stage of one slot: A on /d:0; B on /d:1 (slot 0),
// C and D on /d:2 (slot 1); three micro-batches under GPipe; forward 1 s,
// backward 2 s, updates 0.5 s, accumulating 1 s per parameter after a
// replica's first backward, free copies. Stage 1's forwards end at 4, 7
// and 10; its backwards run micro-batch 2's [10, 16] (D', C', B'), 1's
// from 16, its nodes done at 22, then each slot accumulates: /d:1 w2
// [22, 23], /d:2 w3 and w4 [22, 24]. The backward's gradient leaves for
// stage 0 once every slot has ended the pass, at 22, as the executor's
// first device sends it before its workers accumulate: stage 0's backward
// of micro-batch 1 runs [22, 25] (2 s and w1's accumulation). Micro-batch
// 0's backward on stage 1 starts each slot's part after that slot's
// accumulation: D' [24, 26], C' [26, 28], B' [28, 30]; then /d:1 [30, 31]
// and w2's update to 31.5, /d:2 [30, 32] and two updates to 33; stage 0's
// last backward [30, 33] and w1's update: 33.5.
TEST(StrategySimulatorTest,
     AWideBackwardsGradientLeavesBeforeItsSlotsAccumulate) {
  ConstantCosts costs(1, 2, 0.5, 0, 1e300);
  costs.set_accumulate(1);
  Fixture f(costs, 3);
  Strategy s;
  s.stage_of_op = {0, 1, 1, 1};
  s.slot_of_op = {0, 0, 1, 1};
  s.stages = {PipelineStage::OneDevicePerReplica({0}),
              PipelineStage::OfReplicas({{1, 2}})};
  s.micro_batches = 3;
  s.schedule = PipelineSchedule::kGPipe;
  StrategySimulation r = f.Run(s);
  EXPECT_NEAR(r.step.step_seconds, 33.5, 1e-12);
  // Stage 0's backwards, and stage 1's passes on /d:1.
  std::vector<std::pair<double, double>> stage0, stage1;
  for (const StrategyTask& t : r.tasks) {
    if (!t.backward || t.adds || t.micro_batch < 0) continue;
    if (t.stage == 0) stage0.emplace_back(t.start_seconds, t.end_seconds);
    if (t.stage == 1 && t.device == 1) {
      stage1.emplace_back(t.start_seconds, t.end_seconds);
    }
  }
  std::sort(stage0.begin(), stage0.end());
  std::sort(stage1.begin(), stage1.end());
  ASSERT_EQ(stage0.size(), 3u);
  EXPECT_NEAR(stage0[1].first, 22, 1e-12);
  EXPECT_NEAR(stage0[1].second, 25, 1e-12);
  ASSERT_EQ(stage1.size(), 3u);
  EXPECT_NEAR(stage1[1].first, 16, 1e-12);
  EXPECT_NEAR(stage1[1].second, 22, 1e-12);
  EXPECT_NEAR(stage1[2].first, 22, 1e-12);
  EXPECT_NEAR(stage1[2].second, 30, 1e-12);
  // /d:1's and /d:2's accumulations after micro-batch 1's backward.
  int accumulations = 0;
  for (const StrategyTask& t : r.tasks) {
    if (!t.adds || t.start_seconds != 22) continue;
    ++accumulations;
    EXPECT_NEAR(t.end_seconds, t.device == 1 ? 23 : 24, 1e-12) << t.device;
  }
  EXPECT_EQ(accumulations, 2);
}

// The placement file keeps each replica's further devices; `assignment`
// (replica 0's devices) gives each op its slot.
TEST(StrategySimulatorTest, AWideStageRoundTripsThroughThePlacementFile) {
  Fixture f(ConstantCosts(1, 2, 0, 0, 1e300));
  Strategy s;
  s.stage_of_op = {0, 0, 0, 0};
  s.slot_of_op = {0, 1, 1, 0};
  s.stages = {PipelineStage::OfReplicas({{0, 1}, {2, 3}})};
  s.micro_batches = 4;
  const std::string json =
      StrategyToJson(s, f.graph, f.cluster, PlacementInfo{}, 1.0);
  EXPECT_NE(json.find("more_devices"), std::string::npos) << json;
  absl::StatusOr<PlacementOrStrategy> read =
      ParsePlacementOrStrategyJson(json, "s.json", f.graph, f.cluster);
  ASSERT_TRUE(read.ok()) << read.status();
  ASSERT_TRUE(read->strategy.has_value());
  EXPECT_EQ(read->strategy->stage_of_op, s.stage_of_op);
  EXPECT_EQ(read->strategy->slot_of_op, s.slot_of_op);
  ASSERT_EQ(read->strategy->stages[0].num_replicas(), 2);
  for (int k = 0; k < 2; ++k) {
    EXPECT_EQ(read->strategy->stages[0].replicas[k].device_of_slot,
              s.stages[0].replicas[k].device_of_slot);
  }
  EXPECT_EQ(read->placement.device_of_op, (std::vector<int>{0, 1, 1, 0}));
  // An op on a device of another replica names it.
  std::string bad = json;
  const size_t at = bad.find("\"B\": \"/d:1\"");
  ASSERT_NE(at, std::string::npos) << json;
  bad.replace(at, 11, "\"B\": \"/d:3\"");
  read = ParsePlacementOrStrategyJson(bad, "s.json", f.graph, f.cluster);
  ASSERT_FALSE(read.ok());
  EXPECT_NE(read.status().message().find("s.json: strategy: op 'B' is on "
                                         "'/d:3', which is no device of a "
                                         "stage's first replica"),
            std::string::npos)
      << read.status();
}

TEST(StrategySimulatorTest, WideStageErrorsNameWhatIsWrong) {
  Fixture f(ConstantCosts(1, 2, 0, 0, 1e300));
  Strategy s;
  s.stage_of_op = {0, 0, 0, 0};
  s.slot_of_op = {0, 0, 2, 1};
  s.stages = {PipelineStage::OfReplicas({{0, 1}})};
  absl::StatusOr<StrategySimulation> r = SimulateStrategy(f.context, s);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find(
                "op 'C' is in slot 2 of stage 0, whose replicas have 2"),
            std::string::npos)
      << r.status();
  s.slot_of_op = {0, 0, 1, 1};
  s.stages = {PipelineStage::OfReplicas({{0, 1}, {2, 3, 1}})};
  s.micro_batches = 2;
  r = SimulateStrategy(f.context, s);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("replica 1 has 3 devices"),
            std::string::npos)
      << r.status();
  s.stages = {PipelineStage::OfReplicas({{0, 1}, {2, 0}})};
  r = SimulateStrategy(f.context, s);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("/d:0 is in stage 0 and stage 0"),
            std::string::npos)
      << r.status();
}

// SharedWeightChain (W read by four ops m0..m3) on two devices.
struct SharedWeight : ExactFixture {
  explicit SharedWeight(const ConstantCosts& c, int devices = 2)
      : ExactFixture(
            *ImportOnnxModel(testing::SharedWeightChain(), "shared", {}), c,
            devices) {}
};

// W read by four ops, all in one stage on one device, each partial after
// the first added into the buffer (0.25 s each): the strategy's step is
// Simulate's, 4 forwards + 4 backwards + 3 adds + the update.
TEST(StrategySimulatorTest, OneStageChargesPartialAddsAsSimulateDoes) {
  ConstantCosts costs(1, 2, 0.5, 0, 1e300);
  costs.set_partial_add(0.25);
  SharedWeight f(costs);
  Strategy s;
  s.stage_of_op = {0, 0, 0, 0};
  s.stages = {PipelineStage::OneDevicePerReplica({1})};
  absl::StatusOr<StrategySimulation> r = SimulateStrategy(f.context, s);
  ASSERT_TRUE(r.ok()) << r.status();
  absl::StatusOr<SimulationResult> single =
      Simulate(f.context, Placement{{1, 1, 1, 1}});
  ASSERT_TRUE(single.ok());
  EXPECT_DOUBLE_EQ(single->step_seconds, 4 * 1 + 4 * 2 + 3 * 0.25 + 0.5);
  EXPECT_DOUBLE_EQ(r->step.step_seconds, single->step_seconds);
}

// W (held on slot 0) read by m0..m3 on slots 0, 1, 2, 1 of one replica
// over three devices; free copies, 0.25 s per addition (PartialAdditions).
// Forward 4 x 1; backward m3' [0, 2], m2' [2, 4] (slot 2's buffer reaches
// slot 0 at 4, its first there), m1' [4, 6.25] (+ 0.25: slot 1's second
// partial), m0' [6.25, 8.5] (+ 0.25: its partial into the buffer slot 0
// holds); slot 1's buffer, arriving as m0' starts, is added before the
// update (+ 0.25), as in the executor: 4 + 8.5 + 0.25 + 0.5.
TEST(StrategySimulatorTest, AWideSlotAddsUpEveryOtherSlotsBuffer) {
  ConstantCosts costs(1, 2, 0.5, 0, 1e300);
  costs.set_partial_add(0.25);
  SharedWeight f(costs, 3);
  Strategy s;
  s.stage_of_op = {0, 0, 0, 0};
  s.slot_of_op = {0, 1, 2, 1};
  s.stages = {PipelineStage::OfReplicas({{0, 1, 2}})};
  absl::StatusOr<StrategySimulation> r = SimulateStrategy(f.context, s);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_DOUBLE_EQ(r->step.step_seconds, 4 + 8.5 + 0.25 + 0.5);
  // Device 0: m0, m0' + its addition, the merge, the update.
  EXPECT_DOUBLE_EQ(r->step.busy_seconds[0], 1 + 2.25 + 0.25 + 0.5);
  EXPECT_DOUBLE_EQ(r->step.busy_seconds[1], 2 + 4.25);
  EXPECT_DOUBLE_EQ(r->step.busy_seconds[2], 1 + 2);
}

TEST(StrategySimulatorTest, AWeightReadInTwoStagesIsRefused) {
  SharedWeight f(ConstantCosts(1, 1, 0, 0, 1e300));
  Strategy s;
  s.stage_of_op = {0, 0, 1, 1};
  s.stages = {PipelineStage::OneDevicePerReplica({0}),
              PipelineStage::OneDevicePerReplica({1})};
  absl::StatusOr<StrategySimulation> r = SimulateStrategy(f.context, s);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("parameter 'w' lives in stage 0"),
            std::string::npos)
      << r.status();
}

// Recomputation: every stage reruns its forward (1 s) before each backward
// (2 s), so a stage's backward takes 3 s: (m + 3)(f + f + b) + update for
// both schedules, each rerun ending where its backward starts.

}  // namespace
}  // namespace placer
