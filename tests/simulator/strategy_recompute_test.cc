// The strategy simulator's recomputing stages on hand-computed cases.
#include "simulator/strategy_simulator.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "simulator/placement_file.h"
#include "simulator/strategy.h"
#include "tests/simulator/constant_costs.h"
#include "tests/simulator/four_matmul_chain.h"

namespace placer {
namespace {

using Fixture = testing::ChainFixture;
using testing::FourStages;

TEST(StrategySimulatorTest, RecomputingRerunsEachForwardBeforeItsBackward) {
  for (PipelineSchedule schedule :
       {PipelineSchedule::kGPipe, PipelineSchedule::k1F1B}) {
    Fixture f(ConstantCosts(1, 2, 0.5, 0, 1e300));
    for (int m : {1, 4, 8}) {
      Strategy s = FourStages(m, schedule);
      for (PipelineStage& stage : s.stages) stage.recompute = Recompute::kFull;
      SimulationOptions options;
      options.record_schedule = true;
      absl::StatusOr<StrategySimulation> r =
          SimulateStrategy(f.context, s, options);
      ASSERT_TRUE(r.ok()) << r.status();
      EXPECT_DOUBLE_EQ(r->step.step_seconds, (m + 3) * 4.0 + 0.5)
          << ScheduleName(schedule) << " m=" << m;
      EXPECT_DOUBLE_EQ(r->step.busy_seconds[2], m * 4.0 + 0.5);
      int reruns = 0;
      for (const StrategyTask& rerun : r->tasks) {
        if (!rerun.recompute) continue;
        ++reruns;
        EXPECT_FALSE(rerun.backward);
        EXPECT_DOUBLE_EQ(rerun.end_seconds - rerun.start_seconds, 1);
        bool followed = false;
        for (const StrategyTask& t : r->tasks) {
          followed |= t.backward && t.stage == rerun.stage &&
                      t.micro_batch == rerun.micro_batch &&
                      t.start_seconds == rerun.end_seconds;
        }
        EXPECT_TRUE(followed)
            << "R s" << rerun.stage << " j" << rerun.micro_batch;
      }
      EXPECT_EQ(reruns, 4 * m);
    }
  }
  // One stage recomputing, one micro-batch: one second more.
  Fixture f(ConstantCosts(1, 2, 0.5, 0, 1e300));
  Strategy s = FourStages(1, PipelineSchedule::kGPipe);
  s.stages[1].recompute = Recompute::kFull;
  EXPECT_DOUBLE_EQ(f.Run(s).step.step_seconds, 4 + 8 + 1 + 0.5);
  EXPECT_EQ(DescribeStrategy(s),
            "4 stages x (1, 1, 1, 1) replicas, 1 micro-batches, gpipe, ring, "
            "recompute stage 1");
}

// Two stages of two MatMuls: stage 0 keeps x and a (64 bytes each) per
// micro-batch for its backward, stage 1 b and c; each device holds its two
// weights and their momentum (256). Recomputing, each keeps its input only
// (x; b), and the micro-batch in its backward rebuilds the rest. A pass
// holds the rest of one micro-batch's peak: 192 keeping (256 recomputing,
// which rebuilds a or c) for a first micro-batch; for a later one 192 (256)
// beside the two weights' accumulators (128), which exist from the first
// backward's end.
//  - GPipe, 8 micro-batches: keeping, both devices peak at their first
//    backward, 256 + 8 x 128 + 192 = 1472. Recomputing, device 1 peaks
//    there too, 256 + 8 x 64 + 256 = 1024 (7 x 64 less); device 0 at its
//    second backward, 256 + 128 + 7 x 64 + 256 = 1088 (its first:
//    1024), 384 less: the later rest is larger than the first there.
//  - 1F1B: device 0 has two in flight, its peak a later forward:
//    256 + 128 + 2 x 128 + 192 = 832 keeping, 256 + 128 + 2 x 64 + 256 =
//    768 recomputing; device 1 one: 640 both ways.
TEST(StrategySimulatorTest, RecomputingKeepsOnlyTheStagesInputsInFlight) {
  Fixture f(ConstantCosts(1, 2, 0, 0, 1e300));
  for (PipelineSchedule schedule :
       {PipelineSchedule::kGPipe, PipelineSchedule::k1F1B}) {
    Strategy s;
    s.stage_of_op = {0, 0, 1, 1};
    s.stages = {PipelineStage::OneDevicePerReplica({0}),
                PipelineStage::OneDevicePerReplica({1})};
    s.micro_batches = 8;
    s.schedule = schedule;
    const StrategySimulation keep = f.Run(s);
    for (PipelineStage& stage : s.stages) stage.recompute = Recompute::kFull;
    const StrategySimulation rerun = f.Run(s);
    const bool gpipe = schedule == PipelineSchedule::kGPipe;
    EXPECT_EQ(keep.most_in_flight, rerun.most_in_flight);
    const std::vector<int> in_flight =
        gpipe ? std::vector<int>{8, 8, 0, 0} : std::vector<int>{2, 1, 0, 0};
    EXPECT_EQ(rerun.most_in_flight, in_flight);
    const std::vector<int64_t> kept = gpipe ? std::vector<int64_t>{1472, 1472}
                                            : std::vector<int64_t>{832, 640};
    const std::vector<int64_t> rebuilt = gpipe
                                             ? std::vector<int64_t>{1088, 1024}
                                             : std::vector<int64_t>{768, 640};
    for (int d = 0; d < 2; ++d) {
      EXPECT_EQ(keep.step.peak_memory_bytes[d], kept[d])
          << ScheduleName(schedule) << " device " << d;
      EXPECT_EQ(rerun.step.peak_memory_bytes[d], rebuilt[d])
          << ScheduleName(schedule) << " device " << d;
    }
    // Each device reruns its two forwards (2 s) per micro-batch.
    EXPECT_DOUBLE_EQ(rerun.step.busy_seconds[0] - keep.step.busy_seconds[0],
                     8 * 2.0);
  }
}

// A stage's recomputation goes through the placement file; an unknown one
// names the stage.
TEST(StrategySimulatorTest, RecomputationRoundTripsThroughThePlacementFile) {
  Fixture f(ConstantCosts(1, 2, 0, 0, 1e300));
  Strategy s = FourStages(4, PipelineSchedule::k1F1B);
  s.stages[2].recompute = Recompute::kFull;
  const std::string json =
      StrategyToJson(s, f.graph, f.cluster, PlacementInfo{}, 1.0);
  absl::StatusOr<PlacementOrStrategy> read =
      ParsePlacementOrStrategyJson(json, "s.json", f.graph, f.cluster);
  ASSERT_TRUE(read.ok()) << read.status();
  ASSERT_TRUE(read->strategy.has_value());
  for (int k = 0; k < 4; ++k) {
    EXPECT_EQ(read->strategy->stages[k].recompute,
              k == 2 ? Recompute::kFull : Recompute::kNone);
  }
  // Only the recomputing stage says so.
  EXPECT_EQ(json.find("\"recompute\""), json.rfind("\"recompute\"")) << json;
  std::string bad = json;
  const size_t at = bad.find("\"full\"");
  ASSERT_NE(at, std::string::npos) << json;
  bad.replace(at, 6, "\"half\"");
  read = ParsePlacementOrStrategyJson(bad, "s.json", f.graph, f.cluster);
  ASSERT_FALSE(read.ok());
  EXPECT_NE(read.status().message().find(
                "s.json: strategy: stage 2: unknown recomputation 'half'"),
            std::string::npos)
      << read.status();
}

// ZeRO-1 on four replicas (data parallel; the four 64-byte weights, P = 256
// bytes, one bucket; updates 0.5 s per weight; links alpha + bytes / beta):
// the allreduce (2(p-1) steps of 64 bytes) becomes a reduce-scatter and,
// after updates of a quarter of the time, an all-gather (p - 1 steps each);
// the same bytes on the wire; each device holds a quarter of the momentum.

}  // namespace
}  // namespace placer
