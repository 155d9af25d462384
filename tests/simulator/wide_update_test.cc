// A weight read on two slots of a wide stage: the other slot's buffer of
// its partial gradients goes to the update's slot once made, on the link
// (simulator/slot_copies.h: SlotCopy), in the strategy simulator's
// wide pass as in the op placement's lowering; and the buffers later
// stages send a stage, added as the op placement's engine adds them
// (PartialAdditions). Hand-computed with constant costs.
#include <map>
#include <string>
#include <utility>

#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "graph/onnx_import.h"
#include "graph/training_view.h"
#include "gtest/gtest.h"
#include "simulator/chrome_trace.h"
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
// at the end of the backward without its copy: 6.5 + x.)
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

// The same step's record (record_schedule) shows the wide passes' nodes
// and the copies between the slots where they ran, from each pass task's
// start: forward from 0, a [0, 1] on device 0, W to device 1 [0, x], b
// [x, 1 + x] and c [1 + x, 2 + x] there; backward from 2 + x, grad:a on 0
// and grad:c on 1 [2 + x, 4 + x], grad:b [4 + x, 6 + x], device 1's
// buffer of W's gradient to 0 [6 + x, 6 + 2x]. The trace has them: one
// event per node, named by node key as the op placement's trace names
// them, and the two copies by what they carry.
TEST(WideUpdateTest, AWidePassesNodesAndCopiesAreRecordedAndTraced) {
  ExactFixture f(TwoReadersOfOneWeight(), ConstantCosts(1, 2, 0.5, 1e-3, 1e6),
                 2);
  const double x = 1e-3 + 64 / 1e6;
  const Strategy strategy = StrategyOfPlacement(Placement{{0, 1, 1}});
  SimulationOptions record;
  record.record_schedule = true;
  absl::StatusOr<StrategySimulation> r =
      SimulateStrategy(f.context, strategy, record);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_NEAR(r->step.step_seconds, 6.5 + 2 * x, 1e-12);
  struct Run {
    int device;
    double start, end;
  };
  const std::map<std::string, Run> want = {{"a", {0, 0, 1}},
                                           {"b", {1, x, 1 + x}},
                                           {"c", {1, 1 + x, 2 + x}},
                                           {"grad:a", {0, 2 + x, 4 + x}},
                                           {"grad:c", {1, 2 + x, 4 + x}},
                                           {"grad:b", {1, 4 + x, 6 + x}}};
  ASSERT_EQ(r->nodes.size(), want.size());
  for (const StrategyNodeRun& run : r->nodes) {
    const std::string& key = f.view.node(run.node).key;
    SCOPED_TRACE(key);
    ASSERT_EQ(want.count(key), 1u);
    EXPECT_EQ(run.micro_batch, 0);
    EXPECT_EQ(run.device, want.at(key).device);
    EXPECT_NEAR(run.start_seconds, want.at(key).start, 1e-12);
    EXPECT_NEAR(run.end_seconds, want.at(key).end, 1e-12);
  }
  ASSERT_EQ(r->step.transfers.size(), 2u);
  const ScheduledTransfer& weight = r->step.transfers[0];
  EXPECT_EQ(TransferName(f.view, weight), "W");
  EXPECT_EQ(weight.src, 0);
  EXPECT_EQ(weight.dst, 1);
  EXPECT_NEAR(weight.start_seconds, 0, 1e-12);
  EXPECT_NEAR(weight.end_seconds, x, 1e-12);
  const ScheduledTransfer& buffer = r->step.transfers[1];
  EXPECT_EQ(TransferName(f.view, buffer), "grad:W (summed)");
  EXPECT_EQ(buffer.src, 1);
  EXPECT_EQ(buffer.dst, 0);
  EXPECT_NEAR(buffer.start_seconds, 6 + x, 1e-12);
  EXPECT_NEAR(buffer.end_seconds, 6 + 2 * x, 1e-12);

  google::protobuf::Struct trace;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(
                  StrategyChromeTraceJson(f.context, strategy, *r), &trace)
                  .ok());
  std::map<std::string, int> events;  // complete events, by name
  for (const auto& e : trace.fields().at("traceEvents").list_value().values()) {
    const auto& fields = e.struct_value().fields();
    if (fields.at("ph").string_value() == "X") {
      ++events[fields.at("name").string_value()];
    }
  }
  for (const auto& [key, run] : want) EXPECT_EQ(events[key], 1) << key;
  EXPECT_EQ(events["W"], 1);
  EXPECT_EQ(events["grad:W (summed)"], 1);
  EXPECT_EQ(events["F s0 j0"], 2);  // the pass on each slot's device
  EXPECT_EQ(events["B s0 j0"], 2);
}

// The placement run as a gradient-accumulation loop of two micro-batches
// (its strategy, one in flight), adding a micro-batch's gradient into a
// parameter's accumulator 0.25 s: each micro-batch's backward waits for
// device 1's buffer of W (4 + x) before its device adds it in, the second
// adding into both accumulators (+ 0.25 on each device):
// 2 (2 + x) + (4 + x) + (4 + x + 0.25) + 0.5 = 12.75 + 4x. (The closed
// form that timed `place`'s accumulating op placements,
// step + (M - 1)(T + A), ended T with the last backward node, before the
// buffer arrived: 12.75 + 3x.)
TEST(WideUpdateTest, AnAccumulationLoopWaitsForTheBufferEachMicroBatch) {
  ConstantCosts costs(1, 2, 0.5, 1e-3, 1e6);
  costs.set_accumulate(0.25);
  ExactFixture f(TwoReadersOfOneWeight(), costs, 2);
  const double x = 1e-3 + 64 / 1e6;
  StrategySimulation loop = f.Run(StrategyOfPlacement(Placement{{0, 1, 1}}, 2));
  EXPECT_NEAR(loop.step.step_seconds, 12.75 + 4 * x, 1e-12);
  EXPECT_NEAR(loop.seconds_per_batch, (12.75 + 4 * x) / 2, 1e-12);
}

// The same with each partial addition 0.25 s: device 0 holds W's buffer
// from grad:a's start, so device 1's, arriving after the backward, is
// added before W's update: + 0.25 in both simulators, 6.75 + 2x. (Charged
// to grad:a instead, off the critical path, the strategy's step was
// 6.5 + 2x, 0.25 s under the op placement's.)
TEST(WideUpdateTest, AnArrivingBufferIsAddedBeforeTheUpdateInBothSimulators) {
  ConstantCosts costs(1, 2, 0.5, 1e-3, 1e6);
  costs.set_partial_add(0.25);
  ExactFixture f(TwoReadersOfOneWeight(), costs, 2);
  const Placement split{{0, 1, 1}};
  const double x = 1e-3 + 64 / 1e6;
  StrategySimulation wide = f.Run(StrategyOfPlacement(split));
  EXPECT_NEAR(wide.step.step_seconds, 6.75 + 2 * x, 1e-12);
  absl::StatusOr<SimulationResult> op = Simulate(f.context, split);
  ASSERT_TRUE(op.ok()) << op.status();
  EXPECT_NEAR(op->step_seconds, 6.75 + 2 * x, 1e-12);
}

// x [4, 4] -> a = x W -> d = a U (an output); x -> b = x W (an output);
// W and U [4, 4], every tensor 64 bytes; a is W's home.
Graph AChainAndAnotherReader() {
  onnx::ModelProto m = testing::EmptyModel();
  auto* g = m.mutable_graph();
  testing::AddInput(g, "x", {4, 4});
  testing::AddWeight(g, "W", {4, 4});
  testing::AddWeight(g, "U", {4, 4});
  testing::AddNode(g, "MatMul", "a", {"x", "W"}, {"ya"});
  testing::AddNode(g, "MatMul", "d", {"ya", "U"}, {"yd"});
  testing::AddNode(g, "MatMul", "b", {"x", "W"}, {"yb"});
  testing::AddOutput(g, "yd");
  testing::AddOutput(g, "yb");
  absl::StatusOr<Graph> graph = ImportOnnxModel(m, "chain_and_reader", {});
  EXPECT_TRUE(graph.ok()) << graph.status();
  return *std::move(graph);
}

// A buffer that arrives while the node making the held one runs is added
// before the update. a and d on device 0, b on device 1; forward 1 s,
// backward 2 s, updates 0.5 s, additions 0.25 s, a copy x = 1 s + 64 B /
// 1 MB/s.
//   The op placement's engine: device 0 runs a [0, 1], d [1, 2], grad:d
//   [2, 4], grad:a [4, 6], holding W's buffer from 4; device 1 runs b
//   [x, 1 + x], grad:b [1 + x, 3 + x], whose buffer arrives at 3 + 2x,
//   inside grad:a: added before W's update. Updates on device 0 from 6:
//   U's 0.5 and W's 0.5 + 0.25: 7.25. (Counted nowhere, the addition was
//   lost: 7.)
//   The strategy: forward 1 + x (b ends after d); backward: grad:d [0, 2],
//   grad:a [2, 4] on slot 0, grad:b [0, 2] on slot 1, its buffer arriving
//   at 2 + x, inside grad:a; then the addition, 0.25, and the updates, 1:
//   7.25 + (x - 1), the forward's barrier the only difference.
TEST(WideUpdateTest, ABufferArrivingWhileTheHeldOneIsMadeIsAdded) {
  ConstantCosts costs(1, 2, 0.5, 1.0, 1e6);
  costs.set_partial_add(0.25);
  ExactFixture f(AChainAndAnotherReader(), costs, 2);
  const Placement split{{0, 0, 1}};
  const double x = 1.0 + 64 / 1e6;
  absl::StatusOr<SimulationResult> op = Simulate(f.context, split);
  ASSERT_TRUE(op.ok()) << op.status();
  EXPECT_NEAR(op->step_seconds, 7.25, 1e-12);
  StrategySimulation wide = f.Run(StrategyOfPlacement(split));
  EXPECT_NEAR(wide.step.step_seconds, 7.25 + (x - 1), 1e-12);
}

// The same stage over two micro-batches (GPipe), accumulating 0.125 s per
// parameter after the first backward: the one graph holds both passes of
// each kind, one after the other on the replica's devices, and each
// backward's partial additions start afresh. Forwards [0, 1 + x] and
// [1 + x, 2 + 2x] (b after W's copy). Micro-batch 1's backward from
// 2 + 2x: grad:d and grad:a on /d:0 until 4 into it, grad:b's buffer of
// W's gradient arriving at 2 + x, inside grad:a; the pass ends at 6 + 2x
// and /d:0's slot task adds the buffer, 0.25. Micro-batch 0's from there,
// /d:0's part after that addition: the same, /d:0 holding W's buffer
// again only from grad:a's start (were it held from the first backward,
// grad:a would add its partial, 0.25 more); its nodes end at 10.25 + 2x,
// then /d:0 adds the buffer and
// accumulates U's and W's gradients, 0.25 + 2 x 0.125, and updates both,
// 1: 11.75 + 2x.
TEST(WideUpdateTest, EachBackwardOfAWideReplicaAddsItsOwnPartials) {
  ConstantCosts costs(1, 2, 0.5, 1.0, 1e6);
  costs.set_partial_add(0.25);
  costs.set_accumulate(0.125);
  ExactFixture f(AChainAndAnotherReader(), costs, 2);
  Strategy s = StrategyOfPlacement(Placement{{0, 0, 1}});
  s.micro_batches = 2;
  const double x = 1.0 + 64 / 1e6;
  StrategySimulation r = f.Run(s);
  EXPECT_NEAR(r.step.step_seconds, 11.75 + 2 * x, 1e-12);
  EXPECT_NEAR(r.step.busy_seconds[0], 4 + 8 + 0.25 + 0.5 + 1, 1e-12);
  EXPECT_NEAR(r.step.busy_seconds[1], 2 + 4, 1e-12);
  // grad:a of each micro-batch, on /d:0, from the engine's schedule.
  int grad_a = -1;
  for (size_t n = 0; n < f.view.nodes().size(); ++n) {
    if (f.view.nodes()[n].key == "grad:a") grad_a = static_cast<int>(n);
  }
  ASSERT_GE(grad_a, 0);
  std::vector<double> starts(2, -1);
  for (const StrategyNodeRun& run : r.nodes) {
    if (run.node != grad_a) continue;
    EXPECT_EQ(run.device, 0);
    EXPECT_NEAR(run.end_seconds - run.start_seconds, 2, 1e-12);
    starts[run.micro_batch] = run.start_seconds;
  }
  EXPECT_NEAR(starts[1], 4 + 2 * x, 1e-12);
  EXPECT_NEAR(starts[0], 8.25 + 2 * x, 1e-12);
  // /d:0's slot tasks: the first backward's addition, the second's with
  // the accumulation.
  std::vector<double> adds;
  for (const StrategyTask& task : r.tasks) {
    if (task.adds && task.device == 0) {
      adds.push_back(task.end_seconds - task.start_seconds);
    }
  }
  ASSERT_EQ(adds.size(), 2u);
  EXPECT_NEAR(adds[0] + adds[1], 0.25 + 0.5, 1e-12);
}

// x [4, 4] -> a = x W -> ya; ya -> b = ya U (an output) and c = ya V (an
// output); x -> d = x Z (an output). Every tensor 64 bytes.
Graph AValueReadByTwoLaterStages() {
  onnx::ModelProto m = testing::EmptyModel();
  auto* g = m.mutable_graph();
  testing::AddInput(g, "x", {4, 4});
  for (const char* w : {"W", "U", "V", "Z"}) testing::AddWeight(g, w, {4, 4});
  testing::AddNode(g, "MatMul", "a", {"x", "W"}, {"ya"});
  testing::AddNode(g, "MatMul", "b", {"ya", "U"}, {"yb"});
  testing::AddNode(g, "MatMul", "c", {"ya", "V"}, {"yc"});
  testing::AddNode(g, "MatMul", "d", {"x", "Z"}, {"yd"});
  testing::AddOutput(g, "yb");
  testing::AddOutput(g, "yc");
  testing::AddOutput(g, "yd");
  absl::StatusOr<Graph> graph = ImportOnnxModel(m, "two_later", {});
  EXPECT_TRUE(graph.ok()) << graph.status();
  return *std::move(graph);
}

// A value of the first stage read in two later stages: each sends its
// buffer of ya's gradient; the first to arrive is held, the second added
// before ya's sink, grad:a (PartialAdditions). Forward 1 s, backward 2 s,
// updates 0.5 s, additions 0.25 s, free copies; stages 1 (b) and 2 (c)
// on devices 1 and 2.
//   Stage 0 wide, a on /d:0 and d on /d:3: forward [0, 1]; b and c
//   [1, 2]; their backwards [2, 4]; grad:a [4, 6.25] (+ 0.25), then W's
//   update: 6.75, as the op placement's engine times {0, 1, 2, 3}. (The
//   wide pass counted one arrival per sum: 6.5.)
//   Stage 0 of one slot, a and d on /d:0: forward [0, 2]; b and c [2, 3];
//   backwards [3, 5]; grad:a and grad:d [5, 9.25]; two updates: 10.25.
TEST(WideUpdateTest, EveryLaterStagesBufferAfterTheFirstIsAdded) {
  ConstantCosts costs(1, 2, 0.5, 0, 1e300);
  costs.set_partial_add(0.25);
  ExactFixture f(AValueReadByTwoLaterStages(), costs, 4);
  Strategy one;
  one.stage_of_op = {0, 1, 2, 0};
  one.stages = {PipelineStage::OneDevicePerReplica({0}),
                PipelineStage::OneDevicePerReplica({1}),
                PipelineStage::OneDevicePerReplica({2})};
  EXPECT_NEAR(f.Run(one).step.step_seconds, 10.25, 1e-12);
  Strategy wide = one;
  wide.slot_of_op = {0, 0, 0, 1};
  wide.stages[0] = PipelineStage::OfReplicas({{0, 3}});
  EXPECT_NEAR(f.Run(wide).step.step_seconds, 6.75, 1e-12);
  absl::StatusOr<SimulationResult> op =
      Simulate(f.context, Placement{{0, 1, 2, 3}});
  ASSERT_TRUE(op.ok()) << op.status();
  EXPECT_NEAR(op->step_seconds, 6.75, 1e-12);
}

// x [4, 4] -> a = x W (an output); x -> b = x W -> c = b V -> e = c V2 (an
// output). Every tensor 64 bytes; a is W's home.
Graph TwoWeightsAfterASharedOne() {
  onnx::ModelProto m = testing::EmptyModel();
  auto* g = m.mutable_graph();
  testing::AddInput(g, "x", {4, 4});
  for (const char* w : {"W", "V", "V2"}) testing::AddWeight(g, w, {4, 4});
  testing::AddNode(g, "MatMul", "a", {"x", "W"}, {"ya"});
  testing::AddNode(g, "MatMul", "b", {"x", "W"}, {"yb"});
  testing::AddNode(g, "MatMul", "c", {"yb", "V"}, {"yc"});
  testing::AddNode(g, "MatMul", "e", {"yc", "V2"}, {"ye"});
  testing::AddOutput(g, "ya");
  testing::AddOutput(g, "ye");
  absl::StatusOr<Graph> graph = ImportOnnxModel(m, "two_after", {});
  EXPECT_TRUE(graph.ok()) << graph.status();
  return *std::move(graph);
}

// Once a wide replica's last backward has ended, each slot's updates wait
// for its own buffers only, as the executor's workers go on each alone.
// a on device 0, b, c and e on device 1; forward 1 s, backward 2 s,
// updates 0.5 s, a copy x = 1 ms + 64 B / 1 MB/s.
//   The strategy: forward 3 + x (W copied to 1 first); backward 6 (grad:e,
//   grad:c, grad:b on 1), device 1's buffer of W arriving at 6 + x. Device
//   1's updates, V's and V2's, from 9 + x: 10 + x; W's on 0 from 9 + 2x:
//   9.5 + 2x. (Every slot's updates waited for the slowest slot's buffers:
//   10 + 2x.)
//   The op placement's engine: grad:a on 0 [1, 3]; grad:e, grad:c, grad:b
//   on 1 [3 + x, 9 + x], the buffer at 9 + 2x; V's and V2's updates from
//   9 + x: the same 10 + x.
TEST(WideUpdateTest, EachSlotsUpdatesWaitForItsOwnBuffersOnly) {
  ExactFixture f(TwoWeightsAfterASharedOne(),
                 ConstantCosts(1, 2, 0.5, 1e-3, 1e6), 2);
  const Placement split{{0, 1, 1, 1}};
  const double x = 1e-3 + 64 / 1e6;
  EXPECT_NEAR(f.Run(StrategyOfPlacement(split)).step.step_seconds, 10 + x,
              1e-12);
  absl::StatusOr<SimulationResult> op = Simulate(f.context, split);
  ASSERT_TRUE(op.ok()) << op.status();
  EXPECT_NEAR(op->step_seconds, 10 + x, 1e-12);
}

// x [4, 4] -> a = x W (an output), d = x U (an output); x -> b = x W ->
// c = b V (an output). Every tensor 64 bytes; a is W's home.
Graph ALocalWeightBesideASharedOne() {
  onnx::ModelProto m = testing::EmptyModel();
  auto* g = m.mutable_graph();
  testing::AddInput(g, "x", {4, 4});
  for (const char* w : {"W", "U", "V"}) testing::AddWeight(g, w, {4, 4});
  testing::AddNode(g, "MatMul", "a", {"x", "W"}, {"ya"});
  testing::AddNode(g, "MatMul", "d", {"x", "U"}, {"yd"});
  testing::AddNode(g, "MatMul", "b", {"x", "W"}, {"yb"});
  testing::AddNode(g, "MatMul", "c", {"yb", "V"}, {"yc"});
  testing::AddOutput(g, "ya");
  testing::AddOutput(g, "yd");
  testing::AddOutput(g, "yc");
  absl::StatusOr<Graph> graph = ImportOnnxModel(m, "local_beside", {});
  EXPECT_TRUE(graph.ok()) << graph.status();
  return *std::move(graph);
}

// A device's updates start once every buffer they read has arrived, as
// the executor's device takes them all before it updates (and PyTorch's
// optimizer.step() follows a backward that has moved every gradient).
// a and d on device 0, b and c on device 1; forward 1 s, backward 2 s,
// updates 0.5 s, a copy x = 1 ms + 64 B / 1 MB/s.
//   The op placement's engine: device 0 runs a, d [0, 2], grad:a and
//   grad:d [2, 6]; device 1 b, c [x, 2 + x], grad:c, grad:b [2 + x, 6 + x],
//   its buffer of W at device 0 at 6 + 2x; U's and W's updates from then:
//   7 + 2x. (U's update ran at the backward's end, 6 + x, W's after it:
//   7 + x.)
//   The strategy: forward 2 + x; backward 4, the buffer at 4 + x; device
//   0's updates from 6 + 2x: the same 7 + 2x.
TEST(WideUpdateTest, ADevicesUpdatesWaitForEveryBufferTheyRead) {
  ExactFixture f(ALocalWeightBesideASharedOne(),
                 ConstantCosts(1, 2, 0.5, 1e-3, 1e6), 2);
  const Placement split{{0, 0, 1, 1}};
  const double x = 1e-3 + 64 / 1e6;
  absl::StatusOr<SimulationResult> op = Simulate(f.context, split);
  ASSERT_TRUE(op.ok()) << op.status();
  EXPECT_NEAR(op->step_seconds, 7 + 2 * x, 1e-12);
  EXPECT_NEAR(f.Run(StrategyOfPlacement(split)).step.step_seconds, 7 + 2 * x,
              1e-12);
}

}  // namespace
}  // namespace placer
