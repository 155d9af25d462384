// The strategy simulator on hand-computed cases (FlexFlow's style: a fake
// cost model with constant costs, exact answers).
//
// The model is a chain of four MatMuls, each with its own weight:
//   x -> A(w1) -> B(w2) -> C(w3) -> D(w4) -> output,  every tensor [4, 4]
// (64 bytes). One op per stage gives four equal stages.
#include "simulator/strategy_simulator.h"

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "graph/onnx_import.h"
#include "graph/training_view.h"
#include "gtest/gtest.h"
#include "profiles/cluster.h"
#include "profiles/cost_model.h"
#include "simulator/chrome_trace.h"
#include "simulator/placement_file.h"
#include "simulator/simulator.h"
#include "simulator/strategy.h"
#include "tests/graph/test_models.h"
#include "tests/simulator/constant_costs.h"

namespace placer {
namespace {

Graph Chain() {
  onnx::ModelProto m = testing::EmptyModel();
  auto* g = m.mutable_graph();
  testing::AddInput(g, "x", {4, 4});
  const char* ops[] = {"A", "B", "C", "D"};
  std::string in = "x";
  for (int i = 0; i < 4; ++i) {
    std::string w = "w" + std::to_string(i + 1);
    std::string out = std::string(1, static_cast<char>('a' + i));
    testing::AddWeight(g, w, {4, 4});
    testing::AddNode(g, "MatMul", ops[i], {in, w}, {out});
    in = out;
  }
  testing::AddOutput(g, in);
  absl::StatusOr<Graph> graph = ImportOnnxModel(m, "chain", {});
  EXPECT_TRUE(graph.ok()) << graph.status();
  return *std::move(graph);
}

// Four stages, one op and one device each.
Strategy FourStages(int micro_batches, PipelineSchedule schedule) {
  Strategy s;
  s.stage_of_op = {0, 1, 2, 3};
  s.stages = {PipelineStage::OneDevicePerReplica({0}),
              PipelineStage::OneDevicePerReplica({1}),
              PipelineStage::OneDevicePerReplica({2}),
              PipelineStage::OneDevicePerReplica({3})};
  s.micro_batches = micro_batches;
  s.schedule = schedule;
  return s;
}

// The chain on `devices` flat devices.
struct Fixture : ExactFixture {
  explicit Fixture(const ConstantCosts& c, int devices = 4)
      : ExactFixture(Chain(), c, devices) {}
};

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
  // The strategy, one micro-batch in flight (1F1B), counts the same: the
  // buffers once, a later micro-batch's peak beside them (not the first
  // one's, which holds grad:D's 64 of its own buffer already: 1216 counted
  // it twice). GPipe keeps the other three micro-batches' stashes (x, a,
  // b, c: 256 each) too.
  Strategy in_turn = one;
  in_turn.schedule = PipelineSchedule::k1F1B;
  EXPECT_EQ(f.Run(in_turn).step.peak_memory_bytes[0], 1152);
  EXPECT_EQ(f.Run(in_turn).step.peak_breakdown[0].gradients, 256);
  EXPECT_EQ(f.Run(one).step.peak_memory_bytes[0], 1152 + 3 * 256);
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
  // m of them under GPipe, at most S = 4 under 1F1B.
  Fixture f(ConstantCosts(1, 2, 0, 0, 1e300));
  const int m = 8;
  StrategySimulation gpipe = f.Run(FourStages(m, PipelineSchedule::kGPipe));
  StrategySimulation one = f.Run(FourStages(m, PipelineSchedule::k1F1B));
  EXPECT_EQ(gpipe.most_in_flight, (std::vector<int>{8, 8, 8, 8}));
  EXPECT_EQ(one.most_in_flight, (std::vector<int>{4, 3, 2, 1}));
  EXPECT_EQ(gpipe.step.peak_memory_bytes[0] - one.step.peak_memory_bytes[0],
            (m - 4) * 64);
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
// micro-batch for its backward, stage 1 b and c. Recomputing, each keeps
// its input only (x; b), and the micro-batch in its backward rebuilds the
// rest: the peak falls by (in flight - 1) x 64 bytes — 7 x 64 under GPipe
// with 8 micro-batches, 64 on stage 0 under 1F1B (two in flight), 0 on
// stage 1 (one).
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
    for (int d = 0; d < 2; ++d) {
      EXPECT_EQ(
          keep.step.peak_memory_bytes[d] - rerun.step.peak_memory_bytes[d],
          (rerun.most_in_flight[d] - 1) * 64)
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
// half of the gradient buffer (128 bytes less than ZeRO-1).
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
    EXPECT_EQ(one.step.peak_memory_bytes[d] - two.step.peak_memory_bytes[d],
              128)
        << d;
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
