// The strategy simulator on hand-computed cases (FlexFlow's style: a fake
// cost model with constant costs, exact answers): pipelines, replicas and
// their allreduce, traces, errors. On the chain of tests/simulator/
// four_matmul_chain.h; wide stages: wide_stage_test.cc; recomputation:
// strategy_recompute_test.cc; ZeRO: strategy_zero_test.cc.
#include "simulator/strategy_simulator.h"

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "profiles/cluster.h"
#include "profiles/cost_model.h"
#include "simulator/chrome_trace.h"
#include "simulator/simulator.h"
#include "simulator/strategy.h"
#include "tests/simulator/constant_costs.h"
#include "tests/simulator/four_matmul_chain.h"

namespace placer {
namespace {

using Fixture = testing::ChainFixture;
using testing::FourStages;

TEST(StrategySimulatorTest, FourEqualStagesForwardOnlyTakeMPlusThreeT) {
  // t = 1 s per micro-batch and stage; free backward, updates, transfers.
  for (PipelineSchedule schedule :
       {PipelineSchedule::kGPipe, PipelineSchedule::k1F1B}) {
    Fixture f(ConstantCosts(1, 0, 0, 0, 1e300));
    for (int m : {1, 2, 4, 8}) {
      StrategySimulation r = f.Run(FourStages(m, schedule));
      EXPECT_DOUBLE_EQ(r.step.step_seconds, m + 3.0)
          << ScheduleName(schedule) << " m=" << m;
      EXPECT_DOUBLE_EQ(r.seconds_per_batch, (m + 3.0) / m);
    }
  }
}

TEST(StrategySimulatorTest, GPipeAndOneFOneBTrainingFormula) {
  // f = 1 s, b = 2 s per stage and micro-batch, updates 0.5 s, free
  // transfers: (m + S - 1)(f + b) + update for both schedules.
  for (PipelineSchedule schedule :
       {PipelineSchedule::kGPipe, PipelineSchedule::k1F1B}) {
    Fixture f(ConstantCosts(1, 2, 0.5, 0, 1e300));
    for (int m : {1, 4, 8}) {
      StrategySimulation r = f.Run(FourStages(m, schedule));
      EXPECT_DOUBLE_EQ(r.step.step_seconds, (m + 3) * 3.0 + 0.5)
          << ScheduleName(schedule) << " m=" << m;
      // Each device: m forwards, m backwards, one update.
      EXPECT_DOUBLE_EQ(r.step.busy_seconds[2], m * 3.0 + 0.5);
    }
  }
}

TEST(StrategySimulatorTest, TransfersBetweenStagesAreOnThePath) {
  // One micro-batch, f = 1, b = 2, no updates; a transfer of 64 bytes
  // takes 1 ms + 64 us. Forward: 4 f + 3 transfers; backward: 4 b + 3
  // (one 64-byte gradient buffer per stage boundary).
  Fixture f(ConstantCosts(1, 2, 0, 1e-3, 1e6));
  StrategySimulation r = f.Run(FourStages(1, PipelineSchedule::kGPipe));
  const double x = 1e-3 + 64 / 1e6;
  EXPECT_NEAR(r.step.step_seconds, 4 * 1 + 4 * 2 + 6 * x, 1e-12);
  EXPECT_EQ(r.step.bytes_moved, 6 * 64);
  EXPECT_EQ(r.step.transfers_count, 6);
}

TEST(StrategySimulatorTest, OneStageOneReplicaIsTheSingleDeviceStep) {
  Fixture f(ConstantCosts(1, 2, 0.5, 1e-3, 1e6));
  Strategy s;
  s.stage_of_op = {0, 0, 0, 0};
  s.stages = {PipelineStage::OneDevicePerReplica({1})};
  StrategySimulation r = f.Run(s);
  Placement p{{1, 1, 1, 1}};
  absl::StatusOr<SimulationResult> single = Simulate(f.context, p);
  ASSERT_TRUE(single.ok());
  EXPECT_DOUBLE_EQ(r.step.step_seconds, single->step_seconds);
  EXPECT_DOUBLE_EQ(r.step.step_seconds, 4 * 1 + 4 * 2 + 4 * 0.5);
  EXPECT_EQ(r.step.peak_memory_bytes, single->peak_memory_bytes);
  EXPECT_EQ(r.step.bytes_moved, 0);
}

TEST(StrategySimulatorTest, EveryBackwardAfterAReplicasFirstAccumulates) {
  // f = 1, b = 2, updates 0.5, adding a gradient into a buffer 0.25 per
  // parameter (4 parameters: 1 s per micro-batch after a replica's first),
  // free transfers.
  ConstantCosts costs(1, 2, 0.5, 0, 1e300);
  costs.set_accumulate(0.25);
  Fixture f(costs);
  Strategy one;
  one.stage_of_op = {0, 0, 0, 0};
  one.stages = {PipelineStage::OneDevicePerReplica({0})};
  one.micro_batches = 4;
  // 4 x (4 f + 4 b) + 3 x 1 + 4 updates.
  EXPECT_DOUBLE_EQ(f.Run(one).step.step_seconds, 4 * 12 + 3 * 1 + 4 * 0.5);
  // The same as the op placement on that device run as a
  // gradient-accumulation loop (its strategy, one micro-batch in flight).
  StrategySimulation loop =
      f.Run(StrategyOfPlacement(Placement{{0, 0, 0, 0}}, 4));
  EXPECT_DOUBLE_EQ(loop.step.step_seconds, 4 * 12 + 3 * 1 + 4 * 0.5);
  EXPECT_DOUBLE_EQ(loop.step.busy_seconds[0], 4 * 12 + 3 * 1 + 4 * 0.5);
  // Memory (64-byte tensors): one micro-batch peaks at 960 when grad:C
  // starts (weights and momentum 512, x 64, a and b 128, grad:D's outputs
  // 128, grad:C's 128). A later one holds the four gradient buffers (256)
  // from its start and peaks at 1152 when grad:D starts: 512 + 64 + 256,
  // a, b and c 192, grad:D's outputs 128.
  EXPECT_EQ(f.Run(StrategyOfPlacement(Placement{{0, 0, 0, 0}}))
                .step.peak_memory_bytes[0],
            960);
  EXPECT_EQ(loop.step.peak_memory_bytes[0], 1152);
  // Simulate tracks the later micro-batch only when asked (zeros else).
  SimulationOptions later;
  later.later_micro_batch = true;
  absl::StatusOr<SimulationResult> asked =
      Simulate(f.context, Placement{{0, 0, 0, 0}}, later);
  absl::StatusOr<SimulationResult> plain =
      Simulate(f.context, Placement{{0, 0, 0, 0}});
  ASSERT_TRUE(asked.ok() && plain.ok());
  EXPECT_EQ(asked->later_peak_memory_bytes[0], 1152);
  EXPECT_EQ(asked->accumulator_bytes[0], 256);
  EXPECT_EQ(plain->later_peak_memory_bytes[0], 0);
  EXPECT_EQ(plain->accumulator_bytes[0], 0);
  EXPECT_EQ(plain->peak_memory_bytes[0], 960);
  // When: as grad:C started (four forwards of 1 s, grad:D's 2 s).
  EXPECT_EQ(DescribePeakMoment(f.view, plain->peak_moments[0]),
            "when node 'grad:C' started (6.000000 s into the step)");
  EXPECT_EQ(DescribePeakMoment(f.view, PeakMoment()),
            "from the step's start (what is resident)");
  // Before grad:D starts: weights and momentum, x, and a, b, c, d.
  EXPECT_EQ(plain->forward_peak_memory_bytes[0], 512 + 64 + 4 * 64);
  // The strategy, one micro-batch in flight (1F1B), counts the same: the
  // buffers once, a later micro-batch's peak beside them (not the first
  // one's, which holds grad:D's 64 of its own buffer already: 1216 counted
  // it twice).
  Strategy in_turn = one;
  in_turn.schedule = PipelineSchedule::k1F1B;
  EXPECT_EQ(f.Run(in_turn).step.peak_memory_bytes[0], 1152);
  EXPECT_EQ(f.Run(in_turn).step.peak_breakdown[0].gradients, 256);
  // Reached when B1 starts: B0's end brought the accumulators, B1 brings
  // a later micro-batch's rest beside them.
  const PeakPass in_turn_peak = f.Run(in_turn).peak_passes[0];
  EXPECT_EQ(in_turn_peak.stage, 0);
  EXPECT_EQ(in_turn_peak.micro_batch, 1);
  EXPECT_TRUE(in_turn_peak.backward);
  EXPECT_FALSE(in_turn_peak.at_end);
  // GPipe runs the four forwards first, each micro-batch keeping x, a, b
  // and c (256 bytes) until its backward ends. Its first backward (B3) is
  // the first micro-batch's, with no accumulators yet: 960 beside the
  // other three's stashes, 960 + 3 x 256 = 1728; each later backward
  // holds the accumulators but one stash fewer: B2 1152 + 2 x 256 = 1664.
  // (Counting the most in flight beside the larger of the two peaks would
  // say 1152 + 3 x 256 = 1920, a moment that never comes.)
  StrategySimulation gpipe = f.Run(one);
  EXPECT_EQ(gpipe.step.peak_memory_bytes[0], 960 + 3 * 256);
  EXPECT_EQ(gpipe.step.peak_breakdown[0].activations, 4 * 256);
  EXPECT_EQ(gpipe.step.peak_breakdown[0].gradients, 0);
  EXPECT_EQ(gpipe.step.peak_breakdown[0].parameters, 512);
  EXPECT_EQ(gpipe.most_in_flight[0], 4);
  EXPECT_EQ(DescribePeakPass(gpipe.peak_passes[0]),
            "at stage 0's backward of micro-batch 3 (16.000000 s into the "
            "step)");
  EXPECT_EQ(DescribePeakPass(PeakPass()),
            "from the step's start (what is resident)");
  // The timeline as recorded on device 0: resident 512 at 0; F0 keeps its
  // stash (256) and, while it runs, holds what a micro-batch's forward
  // held beyond it (d, 64); then the stash alone; ... the peak when B3
  // starts (16 s: four forwards of 4 s), not at F3's start (12 s, 4 x
  // 256 + 64 beside the weights); at the end the accumulators (256)
  // beside the parameters.
  std::vector<int64_t> on_device_0;
  double last_seconds = 0, peak_seconds = -1;
  int64_t highest = 0;
  for (const MemorySample& sample : gpipe.step.memory) {
    if (sample.device != 0) continue;
    EXPECT_GE(sample.seconds, last_seconds);
    last_seconds = sample.seconds;
    on_device_0.push_back(sample.bytes);
    if (sample.bytes > highest) {
      highest = sample.bytes;
      peak_seconds = sample.seconds;
    }
  }
  ASSERT_GE(on_device_0.size(), 3u);
  EXPECT_EQ(on_device_0[0], 512);
  EXPECT_EQ(on_device_0[1], 512 + 256 + 64);
  EXPECT_EQ(on_device_0[2], 512 + 256);
  EXPECT_EQ(highest, 960 + 3 * 256);
  EXPECT_DOUBLE_EQ(peak_seconds, 16);
  EXPECT_EQ(on_device_0.back(), 512 + 256);
  // Two replicas, two micro-batches each: one accumulation per replica.
  Strategy data = one;
  data.stages = {PipelineStage::OneDevicePerReplica({0, 1})};
  StrategySimulation r = f.Run(data);
  EXPECT_NEAR(r.step.step_seconds, 2 * 12 + 1 * 1 + 4 * 0.5, 1e-9);
  EXPECT_DOUBLE_EQ(r.step.busy_seconds[1], 2 * 12 + 1 * 1 + 4 * 0.5);
  // One micro-batch: nothing to add.
  one.micro_batches = 1;
  EXPECT_DOUBLE_EQ(f.Run(one).step.step_seconds, 12 + 4 * 0.5);
}

TEST(StrategySimulatorTest, TraceShowsTasksTransfersAndBuckets) {
  // Two stages of two ops, each on two replicas, 4 micro-batches.
  Fixture f(ConstantCosts(1, 2, 0.5, 1e-3, 1e6));
  Strategy s;
  s.stage_of_op = {0, 0, 1, 1};
  s.stages = {PipelineStage::OneDevicePerReplica({0, 1}),
              PipelineStage::OneDevicePerReplica({2, 3})};
  s.micro_batches = 4;
  SimulationOptions record;
  record.record_schedule = true;
  absl::StatusOr<StrategySimulation> r =
      SimulateStrategy(f.context, s, record);
  ASSERT_TRUE(r.ok()) << r.status();
  google::protobuf::Struct trace;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(
                  StrategyChromeTraceJson(f.context, s, *r), &trace)
                  .ok());
  std::map<std::string, int> by_category;
  double last_end = 0;
  for (const auto& e : trace.fields().at("traceEvents").list_value().values()) {
    const auto& fields = e.struct_value().fields();
    if (fields.at("ph").string_value() != "X") continue;
    ++by_category[fields.at("cat").string_value()];
    last_end = std::max(last_end, (fields.at("ts").number_value() +
                                   fields.at("dur").number_value()) / 1e6);
  }
  EXPECT_EQ(by_category["forward"], 2 * 4);
  EXPECT_EQ(by_category["backward"], 2 * 4);
  EXPECT_EQ(by_category["update"], 4);  // one per replica
  EXPECT_EQ(by_category["transfer"], 4 + 4);  // activations, gradients
  // One bucket per stage (64-byte weights), on each of its replicas.
  EXPECT_EQ(by_category["allreduce"], 2 * 2);
  EXPECT_NEAR(last_end, r->step.step_seconds, 1e-9);
}

TEST(StrategySimulatorTest, RingAllreduceMatchesTheAlphaBetaFormula) {
  // Data parallel: one stage, four replicas, free compute. The four 64-byte
  // gradients (B = 256 bytes) fit one bucket; ring: 2(p-1) alpha +
  // 2(p-1)/p B / beta.
  Fixture f(ConstantCosts(0, 0, 0, 1e-3, 1e6));
  Strategy s;
  s.stage_of_op = {0, 0, 0, 0};
  s.stages = {PipelineStage::OneDevicePerReplica({0, 1, 2, 3})};
  s.micro_batches = 4;
  const double alpha = 1e-3, beta = 1e6, B = 256, p = 4;
  StrategySimulation ring = f.Run(s);
  EXPECT_NEAR(ring.step.step_seconds,
              2 * (p - 1) * alpha + 2 * (p - 1) / p * B / beta, 1e-15);
  EXPECT_EQ(ring.step.bytes_moved, 2 * 3 * 256);
  // Tree (heap order on 4 devices: height 2): reduce up, broadcast down,
  // each level one full-size transfer: 2 * 2 * (alpha + B / beta).
  s.allreduce = AllreduceAlgorithm::kTree;
  StrategySimulation tree = f.Run(s);
  EXPECT_NEAR(tree.step.step_seconds, 2 * 2 * (alpha + B / beta), 1e-15);
  // On 8 devices the heap is 3 levels high.
  EXPECT_NEAR(
      AllreduceSeconds(f.costs, FlatCluster(8), {0, 1, 2, 3, 4, 5, 6, 7}, 800,
                       AllreduceAlgorithm::kTree),
      2 * 3 * (alpha + 800 / beta), 1e-15);
  EXPECT_NEAR(
      AllreduceSeconds(f.costs, FlatCluster(8), {0, 1, 2, 3, 4, 5, 6, 7}, 800,
                       AllreduceAlgorithm::kRing),
      2 * 7 * alpha + 2 * 7.0 / 8 * 800 / beta, 1e-15);
}

TEST(StrategySimulatorTest, RooflineRingOnP100sIsTheFormula) {
  std::unique_ptr<CostModel> roofline = NewRooflineCostModel();
  absl::StatusOr<Cluster> p100 = LoadCluster("p100x4");
  ASSERT_TRUE(p100.ok()) << p100.status();
  const double B = 4e8;  // 100M float32 gradients
  EXPECT_NEAR(AllreduceSeconds(*roofline, *p100, {0, 1, 2, 3},
                               static_cast<int64_t>(B),
                               AllreduceAlgorithm::kRing),
              2 * 3 * 1e-5 + 2 * 3.0 / 4 * B / 1.2e10, 1e-12);
}

// Two hosts of two devices: 1 GB/s and 1 us inside a host, 1 MB/s and
// 1 ms between hosts (the roofline's link times). A ring of all four
// crosses the slow link at every step: 6 steps of 1 ms + B/4 / 1 MB/s.
// Hierarchical: a reduce-scatter inside each host (1 step of B/2 at
// 1 GB/s), an allreduce of B/2 across hosts per local rank (2 steps of
// B/4 at 1 MB/s), an all-gather inside each host.
TEST(StrategySimulatorTest, HierarchicalAllreduceCrossesHostsOnce) {
  std::string text = "name: \"two_hosts\"\n";
  for (int i = 0; i < 2; ++i) {
    text += "devices { name: \"/d:" + std::to_string(i) +
            "\" kind: GPU peak_flops: 1e12 memory_bandwidth: 1e11 "
            "memory_bytes: 1000000000 }\n";
  }
  text += "default_link { latency_seconds: 1e-6 bandwidth: 1e9 }\n"
          "nodes: 2 between_nodes { latency_seconds: 1e-3 bandwidth: 1e6 }\n";
  absl::StatusOr<Cluster> cluster = ParseCluster(text, "two_hosts.pbtxt");
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  std::unique_ptr<CostModel> roofline = NewRooflineCostModel();
  const int64_t B = 4000;
  const std::vector<int> all = {0, 1, 2, 3};
  EXPECT_TRUE(SpansHostsEvenly(*cluster, all));
  EXPECT_FALSE(SpansHostsEvenly(*cluster, {0, 1}));
  EXPECT_FALSE(SpansHostsEvenly(*cluster, {0, 2}));  // one device a host
  EXPECT_NEAR(
      AllreduceSeconds(*roofline, *cluster, all, B, AllreduceAlgorithm::kRing),
      6 * (1e-3 + 1000 / 1e6), 1e-12);
  EXPECT_NEAR(AllreduceSeconds(*roofline, *cluster, all, B,
                               AllreduceAlgorithm::kHierarchical),
              2 * (1e-6 + 2000 / 1e9) + 2 * (1e-3 + 1000 / 1e6), 1e-12);
  // Where hosts are uneven it is the ring.
  EXPECT_DOUBLE_EQ(AllreduceSeconds(*roofline, *cluster, {0, 1, 2}, B,
                                    AllreduceAlgorithm::kHierarchical),
                   AllreduceSeconds(*roofline, *cluster, {0, 1, 2}, B,
                                    AllreduceAlgorithm::kRing));
  EXPECT_EQ(AllreduceName(*ParseAllreduce("hierarchical")), "hierarchical");
  // ZeRO's reduce-scatter and all-gather: the ring's 3 steps of B/4 across
  // the slow link; in two levels, 1 step of B/2 inside each host, then 1
  // of B/4 across hosts per local rank, the two ranks' links in parallel.
  using Sharded = double (*)(const CostModel&, const Cluster&,
                             const std::vector<int>&, int64_t,
                             AllreduceAlgorithm);
  for (Sharded collective : {static_cast<Sharded>(&ReduceScatterSeconds),
                             static_cast<Sharded>(&AllGatherSeconds)}) {
    EXPECT_NEAR(collective(*roofline, *cluster, all, B,
                           AllreduceAlgorithm::kRing),
                3 * (1e-3 + 1000 / 1e6), 1e-12);
    EXPECT_NEAR(collective(*roofline, *cluster, all, B,
                           AllreduceAlgorithm::kHierarchical),
                (1e-6 + 2000 / 1e9) + (1e-3 + 1000 / 1e6), 1e-12);
    EXPECT_DOUBLE_EQ(collective(*roofline, *cluster, {0, 1, 2}, B,
                                AllreduceAlgorithm::kHierarchical),
                     collective(*roofline, *cluster, {0, 1, 2}, B,
                                AllreduceAlgorithm::kRing));
  }
}

TEST(StrategySimulatorTest, BucketsOverlapTheLastBackward) {
  // Data parallel on two devices, one micro-batch each: f = 1 s, b = 1 s,
  // transfers 1 ms + bytes / 1 MB/s. With 64-byte buckets every weight's
  // gradient is reduced as soon as its backward node ends: D's at 5 s,
  // C's at 6 s, B's at 7 s, A's at 8 s, each taking 2 (1 ms + 32 us); only
  // the last one is exposed.
  Fixture f(ConstantCosts(1, 1, 0, 1e-3, 1e6));
  Strategy s;
  s.stage_of_op = {0, 0, 0, 0};
  s.stages = {PipelineStage::OneDevicePerReplica({0, 1})};
  s.micro_batches = 2;
  s.bucket_bytes = 64;
  StrategySimulation r = f.Run(s);
  const double one = 2 * (1e-3 + 32 / 1e6);
  EXPECT_NEAR(r.step.step_seconds, 8 + one, 1e-12);
  EXPECT_NEAR(r.allreduce_seconds, 4 * one, 1e-12);
  // One bucket for all: it waits for A's gradient, then takes 256 bytes.
  s.bucket_bytes = 1 << 20;
  r = f.Run(s);
  EXPECT_NEAR(r.step.step_seconds, 8 + 2 * (1e-3 + 128 / 1e6), 1e-12);
}

TEST(StrategySimulatorTest, MicroBatchesInFlightSetTheStashMemory) {
  // Stage 0's backward keeps x (64 bytes) per micro-batch in flight: all
  // m of them under GPipe, at most S = 4 under 1F1B. GPipe's peak there is
  // its first backward, every stash held and no accumulator yet; 1F1B's a
  // later micro-batch's, four stashes beside w1's accumulator (64 bytes),
  // and a later micro-batch's rest is the first one's: the difference is
  // (m - 4) x 64 less that accumulator.
  Fixture f(ConstantCosts(1, 2, 0, 0, 1e300));
  const int m = 8;
  StrategySimulation gpipe = f.Run(FourStages(m, PipelineSchedule::kGPipe));
  StrategySimulation one = f.Run(FourStages(m, PipelineSchedule::k1F1B));
  EXPECT_EQ(gpipe.most_in_flight, (std::vector<int>{8, 8, 8, 8}));
  EXPECT_EQ(one.most_in_flight, (std::vector<int>{4, 3, 2, 1}));
  EXPECT_EQ(gpipe.step.peak_memory_bytes[0] - one.step.peak_memory_bytes[0],
            (m - 4) * 64 - 64);
  EXPECT_EQ(gpipe.step.peak_breakdown[0].activations, m * 64);
  EXPECT_EQ(gpipe.step.peak_breakdown[0].gradients, 0);
  EXPECT_EQ(one.step.peak_breakdown[0].activations, 4 * 64);
  EXPECT_EQ(one.step.peak_breakdown[0].gradients, 64);
  // The last stage has one in flight under 1F1B: its one-micro-batch peak
  // plus the gradient buffer it keeps across micro-batches (w4: 64 bytes).
  Strategy single = FourStages(1, PipelineSchedule::k1F1B);
  StrategySimulation r1 = f.Run(single);
  EXPECT_EQ(one.step.peak_memory_bytes[3], r1.step.peak_memory_bytes[3] + 64);
}

TEST(StrategySimulatorTest, ErrorsNameWhatIsWrong) {
  Fixture f(ConstantCosts(1, 2, 0, 0, 1e300));
  Strategy backwards = FourStages(1, PipelineSchedule::kGPipe);
  backwards.stage_of_op = {1, 0, 2, 3};
  absl::StatusOr<StrategySimulation> r =
      SimulateStrategy(f.context, backwards);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("op 'B' in stage 0 reads 'a'"),
            std::string::npos)
      << r.status();

  Strategy shared = FourStages(1, PipelineSchedule::kGPipe);
  shared.stages[1] = PipelineStage::OneDevicePerReplica({0});
  r = SimulateStrategy(f.context, shared);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("/d:0 is in stage 0 and stage 1"),
            std::string::npos)
      << r.status();

  Strategy few = FourStages(1, PipelineSchedule::kGPipe);
  few.stage_of_op = {0, 0, 0, 0};
  few.stages = {PipelineStage::OneDevicePerReplica({0, 1, 2})};
  r = SimulateStrategy(f.context, few);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("every replica needs one"),
            std::string::npos)
      << r.status();
}

// Op placement inside a stage: one stage whose replica is two devices, A
// and B on the first (slot 0), C and D on the second. f = 1, b = 2,
// updates 0.5, 64-byte transfers x = 1 ms + 64 us. Forward: A, B, then b
// is copied on the link (x) and C runs, D: 4f + x. Backward: D', C', then
// C''s partial gradient of b is copied back (x) and B' runs: 4b + x. Each
// slot's two updates run on its own device: 2u. Simulate's step for the
// same op placement. The copies are the links', not the devices' busy
// time.

}  // namespace
}  // namespace placer
