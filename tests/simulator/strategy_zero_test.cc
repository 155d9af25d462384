// The strategy simulator's ZeRO stages on hand-computed cases.
#include "simulator/strategy_simulator.h"

#include <string>

#include "gtest/gtest.h"
#include "simulator/placement_file.h"
#include "simulator/strategy.h"
#include "tests/simulator/constant_costs.h"
#include "tests/simulator/four_matmul_chain.h"

namespace placer {
namespace {

using Fixture = testing::ChainFixture;
using testing::FourStages;

TEST(StrategySimulatorTest, ZeroOneShardsTheOptimizerState) {
  Fixture f(ConstantCosts(0, 0, 0.5, 1e-3, 1e6));
  Strategy s;
  s.stage_of_op = {0, 0, 0, 0};
  s.stages = {PipelineStage::OneDevicePerReplica({0, 1, 2, 3})};
  s.micro_batches = 4;
  const double step = 1e-3 + 64 / 1e6;  // one ring step: ceil(256 / 4) bytes
  const StrategySimulation plain = f.Run(s);
  EXPECT_NEAR(plain.step.step_seconds, 6 * step + 4 * 0.5, 1e-12);
  s.zero = ZeroStage::kOptimizerState;
  SimulationOptions record;
  record.record_schedule = true;
  absl::StatusOr<StrategySimulation> zero =
      SimulateStrategy(f.context, s, record);
  ASSERT_TRUE(zero.ok()) << zero.status();
  EXPECT_NEAR(zero->step.step_seconds, 3 * step + 4 * 0.5 / 4 + 3 * step,
              1e-12);
  EXPECT_EQ(zero->step.bytes_moved, plain.step.bytes_moved);
  EXPECT_EQ(zero->step.bytes_moved, 2 * 3 * 256);
  ASSERT_EQ(zero->buckets.size(), 2u);
  EXPECT_EQ(zero->buckets[0].collective, Collective::kReduceScatter);
  EXPECT_EQ(zero->buckets[1].collective, Collective::kAllGather);
  EXPECT_EQ(zero->buckets[1].bytes, 256);
  // Momentum: 256 bytes each without; 64 with.
  for (int d = 0; d < 4; ++d) {
    EXPECT_EQ(plain.step.peak_memory_bytes[d] - zero->step.peak_memory_bytes[d],
              256 - 64)
        << d;
  }
  EXPECT_EQ(DescribeStrategy(s),
            "1 stage x 4 replicas, 4 micro-batches, gpipe, ring, zero-1");
}

// ZeRO-2 on two replicas of two micro-batches each (f = 1, b = 2 per node:
// a replica's passes F B F B end at 12 and 24): each round's gradients are
// reduce-scattered as its backwards end (one ring step of 128 bytes, x),
// so the step is as long as ZeRO-1's, 24 + x + 1 (updates, halved) + x,
// with one more reduce-scatter on the wire; each device accumulates into
// half of the gradient buffer (128 bytes less than ZeRO-1). That lowers
// the peak under 1F1B (F B F B), whose peak is the later micro-batch's,
// beside its accumulators. GPipe (F F B B) peaks at its first backward,
// both stashes held and no accumulator yet, holding the rest of one
// micro-batch's peak: on one device that falls as grad:C starts (960
// bytes: weights and momentum 512, x, a and b 192, dc 64, dW4 64, and
// grad:C's dW3 and db 128), where ZeRO-2 keeps only its half of dW4,
// complete once grad:D ended and reduce-scattered then: 32 bytes less.
TEST(StrategySimulatorTest, ZeroTwoReduceScattersEveryRound) {
  Fixture f(ConstantCosts(1, 2, 0.5, 1e-3, 1e6));
  Strategy s;
  s.stage_of_op = {0, 0, 0, 0};
  s.stages = {PipelineStage::OneDevicePerReplica({0, 1})};
  s.micro_batches = 4;
  const double x = 1e-3 + 128 / 1e6;
  s.zero = ZeroStage::kOptimizerState;
  const StrategySimulation one = f.Run(s);
  s.zero = ZeroStage::kGradients;
  const StrategySimulation two = f.Run(s);
  EXPECT_NEAR(one.step.step_seconds, 24 + x + 1 + x, 1e-12);
  EXPECT_NEAR(two.step.step_seconds, 24 + x + 1 + x, 1e-12);
  EXPECT_EQ(one.step.bytes_moved, 256 + 256);
  EXPECT_EQ(two.step.bytes_moved, 256 + 256 + 256);
  for (int d = 0; d < 2; ++d) {
    EXPECT_EQ(one.step.peak_memory_bytes[d] - two.step.peak_memory_bytes[d], 32)
        << d;
    EXPECT_EQ(two.step.peak_breakdown[d].gradients, 0) << d;
  }
  s.schedule = PipelineSchedule::k1F1B;
  const StrategySimulation two_in_turn = f.Run(s);
  s.zero = ZeroStage::kOptimizerState;
  const StrategySimulation one_in_turn = f.Run(s);
  for (int d = 0; d < 2; ++d) {
    EXPECT_EQ(one_in_turn.step.peak_memory_bytes[d] -
                  two_in_turn.step.peak_memory_bytes[d],
              128)
        << d;
    EXPECT_EQ(two_in_turn.step.peak_breakdown[d].gradients, 128) << d;
  }
}

// ZeRO-3 on four replicas of one micro-batch each (f = 1, b = 2 per node,
// updates 0.5): before each MatMul reads its 64-byte weight it is
// all-gathered (3 ring steps of 16 bytes: G), the next one during the
// MatMul before it, so each pass exposes one G; the round's gradients
// are reduce-scattered (3 steps of 64 bytes) and each replica updates its
// quarter; nothing is gathered after the updates. Each device holds a
// quarter of the weights and momentum, plus two gathered weights at most.
TEST(StrategySimulatorTest, ZeroThreeGathersEachWeightBeforeItsUse) {
  Fixture f(ConstantCosts(1, 2, 0.5, 1e-3, 1e6));
  Strategy s;
  s.stage_of_op = {0, 0, 0, 0};
  s.stages = {PipelineStage::OneDevicePerReplica({0, 1, 2, 3})};
  s.micro_batches = 4;
  s.zero = ZeroStage::kGradients;
  const StrategySimulation two = f.Run(s);
  s.zero = ZeroStage::kParameters;
  const StrategySimulation three = f.Run(s);
  const double g = 3 * (1e-3 + 16 / 1e6);
  const double reduce_scatter = 3 * (1e-3 + 64 / 1e6);
  EXPECT_NEAR(two.step.step_seconds,
              4 + 8 + reduce_scatter + 0.5 + reduce_scatter,  // the all-gather
              1e-12);
  EXPECT_NEAR(three.step.step_seconds, (g + 4) + (g + 8) + reduce_scatter + 0.5,
              1e-12);
  // Gathers: the forward's four weights, and the backward's of those its
  // nodes read; ZeRO-2's all-gather of the updated weights is gone.
  int backward_reads = 0;
  for (const TrainingNode& n : f.view.nodes()) {
    if (n.kind != NodeKind::kBackward) continue;
    for (int v : n.inputs) {
      backward_reads += f.view.value(v).kind == ValueKind::kParameter;
    }
  }
  EXPECT_EQ(three.step.bytes_moved, (4 + backward_reads) * 3 * 64 + 3 * 256);
  EXPECT_EQ(two.step.bytes_moved, 3 * 256 + 3 * 256);
  // Weights and momentum: ZeRO-2 256 + 64 bytes, ZeRO-3 128 + 128 gathered.
  for (int d = 0; d < 4; ++d) {
    EXPECT_EQ(two.step.peak_memory_bytes[d] - three.step.peak_memory_bytes[d],
              64)
        << d;
  }
  EXPECT_EQ(DescribeStrategy(s),
            "1 stage x 4 replicas, 4 micro-batches, gpipe, ring, zero-3");
}

// ZeRO-1 with the parameter all-gather overlapped (Megatron-LM's
// --overlap-param-gather) on four replicas of one micro-batch each (f = 1,
// b = 2 per node, updates 0.5), in buckets of 128 bytes (two weights, H:
// 3 ring steps of 32 bytes). The backward's buckets (w4 w3, then w2 w1)
// are reduce-scattered at 4 and 8 into it; the last ends H after it.
// Without the overlap the step ends with the updated weights' all-gather
// (3 ring steps of 64 bytes); with it the forward gathers the bucket of w1
// w2 before A and the one of w3 w4 during A and B, exposing one H; the
// same bytes on the wire and the same memory.
TEST(StrategySimulatorTest, ZeroOneOverlapsTheGatherWithTheNextForward) {
  Fixture f(ConstantCosts(1, 2, 0.5, 1e-3, 1e6));
  Strategy s;
  s.stage_of_op = {0, 0, 0, 0};
  s.stages = {PipelineStage::OneDevicePerReplica({0, 1, 2, 3})};
  s.micro_batches = 4;
  s.bucket_bytes = 128;
  s.zero = ZeroStage::kOptimizerState;
  const StrategySimulation after = f.Run(s);
  s.overlap_parameter_gather = true;
  SimulationOptions record;
  record.record_schedule = true;
  absl::StatusOr<StrategySimulation> overlapped =
      SimulateStrategy(f.context, s, record);
  ASSERT_TRUE(overlapped.ok()) << overlapped.status();
  const double h = 3 * (1e-3 + 32 / 1e6);
  const double all_gather = 3 * (1e-3 + 64 / 1e6);
  EXPECT_NEAR(after.step.step_seconds, 4 + 8 + h + 0.5 + all_gather, 1e-12);
  EXPECT_NEAR(overlapped->step.step_seconds, (h + 4) + 8 + h + 0.5, 1e-12);
  EXPECT_EQ(overlapped->step.bytes_moved, after.step.bytes_moved);
  EXPECT_EQ(overlapped->step.bytes_moved, 3 * 256 + 3 * 256);
  EXPECT_EQ(overlapped->step.peak_memory_bytes, after.step.peak_memory_bytes);
  // Only the reduce-scatters are buckets; the gathers are the forward's.
  ASSERT_EQ(overlapped->buckets.size(), 2u);
  for (const StrategyBucket& bucket : overlapped->buckets) {
    EXPECT_EQ(bucket.collective, Collective::kReduceScatter);
  }
  EXPECT_EQ(DescribeStrategy(s),
            "1 stage x 4 replicas, 4 micro-batches, gpipe, ring, zero-1, "
            "gather overlapped");
  // Through the placement file.
  const std::string json =
      StrategyToJson(s, f.graph, f.cluster, PlacementInfo{}, 1.0);
  absl::StatusOr<PlacementOrStrategy> read =
      ParsePlacementOrStrategyJson(json, "s.json", f.graph, f.cluster);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_TRUE(read->strategy->overlap_parameter_gather) << json;
  // Nothing to overlap without ZeRO-1 or -2's gather.
  for (ZeroStage zero : {ZeroStage::kNone, ZeroStage::kParameters}) {
    s.zero = zero;
    absl::StatusOr<StrategySimulation> r = SimulateStrategy(f.context, s);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("needs ZeRO-1 or ZeRO-2"),
              std::string::npos)
        << r.status();
  }
}

// ZeRO's settings go through the placement file; what cannot be sharded is
// refused, naming why.
TEST(StrategySimulatorTest, ZeroRoundTripsAndBadCombinationsAreRefused) {
  Fixture f(ConstantCosts(1, 2, 0, 0, 1e300));
  Strategy s;
  s.stage_of_op = {0, 0, 1, 1};
  s.stages = {PipelineStage::OneDevicePerReplica({0, 1}),
              PipelineStage::OneDevicePerReplica({2, 3})};
  s.micro_batches = 4;
  s.zero = ZeroStage::kGradients;
  const std::string json =
      StrategyToJson(s, f.graph, f.cluster, PlacementInfo{}, 1.0);
  absl::StatusOr<PlacementOrStrategy> read =
      ParsePlacementOrStrategyJson(json, "s.json", f.graph, f.cluster);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->strategy->zero, ZeroStage::kGradients);
  std::string bad = json;
  const size_t at = bad.find("\"zero\": 2");
  ASSERT_NE(at, std::string::npos) << json;
  bad.replace(at, 9, "\"zero\": 4");
  read = ParsePlacementOrStrategyJson(bad, "s.json", f.graph, f.cluster);
  ASSERT_FALSE(read.ok());
  EXPECT_NE(read.status().message().find(
                "s.json: strategy: ZeRO stage 4 is not modelled"),
            std::string::npos)
      << read.status();
  // Three micro-batches on two replicas: rounds of unequal size.
  s.micro_batches = 3;
  absl::StatusOr<StrategySimulation> r = SimulateStrategy(f.context, s);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find(
                "stage 0's 2 replicas need a multiple of 2 micro-batches"),
            std::string::npos)
      << r.status();
  // No replicas to shard over.
  Strategy pipeline = FourStages(4, PipelineSchedule::k1F1B);
  pipeline.zero = ZeroStage::kOptimizerState;
  r = SimulateStrategy(f.context, pipeline);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("ZeRO-1 shards over a stage's "
                                      "data-parallel replicas"),
            std::string::npos)
      << r.status();
}

}  // namespace
}  // namespace placer
