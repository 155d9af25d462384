// The strategy executor against one device: pipelines (GPipe and 1F1B) and
// data-parallel replicas on two CPU devices give the losses and parameters
// of one device accumulating the same micro-batches. Op placements' steps:
// executor_test.cc; recomputation and ZeRO: strategy_recompute_zero_test.cc.
#include "runtime/strategy_executor.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "graph/onnx_import.h"
#include "graph/training_view.h"
#include "gtest/gtest.h"
#include "policies/strategy_search.h"
#include "profiles/cluster.h"
#include "profiles/cost_model.h"
#include "profiles/signature.h"
#include "runtime/cpu_cores.h"
#include "runtime/executor.h"
#include "runtime/measurement.h"
#include "simulator/simulation_context.h"
#include "simulator/simulator.h"
#include "simulator/strategy.h"
#include "simulator/strategy_simulator.h"
#include "tests/graph/test_models.h"
#include "tests/runtime/cpu_cluster.h"
#include "tests/runtime/strategy_runs.h"
#include "tests/runtime/strategy_test_models.h"
#include "zoo/zoo.h"

namespace placer {
namespace {

// As a StepRunner: after a step, Resident gives every parameter and graph
// input, and refuses an activation.
TEST(StrategyExecutorTest, ResidentGivesParametersAndInputsOnly) {
  Graph graph = Gnmt2();
  TrainingView view = BuildTrainingView(graph);
  absl::StatusOr<std::unique_ptr<StrategyExecutor>> e =
      StrategyExecutor::Create(view, Cpus(2), OneDevice(view, 1));
  ASSERT_TRUE(e.ok()) << e.status();
  StepRunner& runner = **e;
  ASSERT_TRUE(runner.Step().ok());
  std::vector<std::string> names = ParameterNames(view);
  for (int t : graph.inputs()) names.push_back(graph.tensor(t).name);
  ASSERT_GT(names.size(), ParameterNames(view).size());
  for (const std::string& name : names) {
    absl::StatusOr<torch::Tensor> a = runner.Resident(name);
    ASSERT_TRUE(a.ok()) << name << ": " << a.status();
    EXPECT_GT(a->numel(), 0) << name;
  }
  const std::string activation =
      graph.tensor(graph.op(graph.topological_order()[0]).outputs[0]).name;
  EXPECT_EQ(runner.Resident(activation).status().code(),
            absl::StatusCode::kNotFound);
}

// MeasureSteps over the executor: an op placement's measurement has every
// step's loss, what it allocated and what it tracked, and every node of the
// view timed on device 0 in each measured step.
TEST(StrategyExecutorTest, AnOpPlacementIsMeasured) {
  Graph graph = Gnmt2();
  TrainingView view = BuildTrainingView(graph);
  const Cluster cluster = Cpus(2);
  MeasureOptions options;
  options.steps = 2;
  options.warmup = 1;
  options.executor.measure_allocations = true;
  absl::StatusOr<std::unique_ptr<StrategyExecutor>> placed =
      StrategyExecutor::Create(
          view, cluster, Placement{std::vector<int>(graph.ops().size(), 0)},
          options.executor);
  ASSERT_TRUE(placed.ok()) << placed.status();
  absl::StatusOr<Measurement> measured = MeasureSteps(**placed, options);
  ASSERT_TRUE(measured.ok()) << measured.status();
  const Measurement& m = *measured;
  ASSERT_EQ(m.losses.size(), 3u);
  EXPECT_NE(m.losses.front(), m.losses.back());
  ASSERT_EQ(m.allocated_peak_bytes.size(), 2u);
  EXPECT_GT(m.allocated_peak_bytes[0], 0);
  ASSERT_EQ(m.peak_memory_bytes.size(), 2u);
  EXPECT_GT(m.peak_memory_bytes[0], 0);
  EXPECT_EQ(m.peak_memory_bytes[1], 0);
  ASSERT_EQ(m.nodes.size(), view.nodes().size());
  for (size_t i = 0; i < m.nodes.size(); ++i) {
    EXPECT_EQ(m.nodes[i].node, static_cast<int>(i));
    EXPECT_EQ(m.nodes[i].device, 0);
    EXPECT_EQ(m.nodes[i].runs, 2) << view.node(i).key;
  }
}

TEST(StrategyExecutorTest, PipelinesAndReplicasMatchOneDevice) {
  const Cluster cluster = Cpus(2);
  // At two opsets: BatchNorm with its statistics outputs, an LSTM.
  std::vector<Model> models = Models({"bn_cnn.op13", "lstm.op17"});
  models.push_back({"resnet50", ResNet50()});
  for (Model& m : models) {
    SCOPED_TRACE(m.name);
    TrainingView view = BuildTrainingView(m.graph);
    const int micro_batches = 4;
    Trajectory one = RunStrategy(view, cluster, OneDevice(view, micro_batches));

    absl::StatusOr<Strategy> data =
        Searched(view, cluster, Parallelism::kData, micro_batches);
    ASSERT_TRUE(data.ok()) << data.status();
    ASSERT_EQ(data->stages.size(), 1u);
    ASSERT_EQ(data->stages[0].num_replicas(), 2);
    ExpectSame(one, RunStrategy(view, cluster, *data), 1e-5);

    absl::StatusOr<Strategy> pipeline =
        Searched(view, cluster, Parallelism::kPipeline, micro_batches);
    if (!pipeline.ok()) {
      // No legal cut (a weight read across the whole model): say so.
      ADD_FAILURE() << "no pipeline for " << m.name << ": "
                    << pipeline.status();
      continue;
    }
    ASSERT_EQ(pipeline->stages.size(), 2u);
    for (PipelineSchedule schedule :
         {PipelineSchedule::kGPipe, PipelineSchedule::k1F1B}) {
      SCOPED_TRACE(ScheduleName(schedule));
      Strategy s = *pipeline;
      s.schedule = schedule;
      ExpectSame(one, RunStrategy(view, cluster, s), 1e-5);
    }
  }
}

// As an op placement's (executor_test): with pin_cpu_devices each
// replica's worker runs on a core of its own, and before_node runs on it;
// a failure there names the node.
TEST(StrategyExecutorTest, PinnedReplicasRunOnCoresOfTheirOwn) {
  const std::vector<int> allowed = AllowedCores();
  if (allowed.size() < 2) GTEST_SKIP() << "needs two cores";
  const Cluster cluster = Cpus(2);
  const Graph graph = Gnmt2();  // outlives the view
  TrainingView view = BuildTrainingView(graph);
  absl::StatusOr<Strategy> data =
      Searched(view, cluster, Parallelism::kData, 2);
  ASSERT_TRUE(data.ok()) << data.status();
  ASSERT_EQ(data->stages[0].num_replicas(), 2);
  for (bool pin : {true, false}) {
    std::mutex mu;
    std::set<std::vector<int>> seen;
    ExecutorOptions options;
    options.pin_cpu_devices = pin;
    options.before_node = [&](const TrainingNode&) {
      std::vector<int> cores = AllowedCores();
      std::lock_guard<std::mutex> lock(mu);
      seen.insert(std::move(cores));
      return absl::OkStatus();
    };
    auto e = StrategyExecutor::Create(view, cluster, *data, options);
    ASSERT_TRUE(e.ok()) << e.status();
    ASSERT_TRUE((*e)->Step().ok());
    const std::set<std::vector<int>> want =
        pin ? std::set<std::vector<int>>{{allowed[0]}, {allowed[1]}}
            : std::set<std::vector<int>>{allowed};
    EXPECT_EQ(seen, want) << "pinned: " << pin;
  }
  ExecutorOptions faulty;
  faulty.before_node = [](const TrainingNode& node) {
    return node.kind == NodeKind::kBackward ? absl::InternalError("injected")
                                            : absl::OkStatus();
  };
  auto e = StrategyExecutor::Create(view, cluster, *data, faulty);
  ASSERT_TRUE(e.ok()) << e.status();
  absl::StatusOr<StepReport> failed = (*e)->Step();
  ASSERT_FALSE(failed.ok());
  EXPECT_NE(failed.status().message().find("': injected"), std::string::npos)
      << failed.status();
}

// Op placement inside a stage: every other op (in topological order) on a
// replica's second device, so that values, weights and partial gradients
// cross between the slots of a task in both directions.
std::vector<int> AlternatingSlots(const TrainingView& view) {
  std::vector<int> slot(view.num_groups(), 0);
  int i = 0;
  for (int n : view.topological_order()) {
    if (view.node(n).kind == NodeKind::kForward) {
      slot[view.node(n).forward_op] = i++ % 2;
    }
  }
  return slot;
}

// Two data-parallel replicas of two devices each (4 CPU devices), and a
// 2-stage pipeline whose first stage spans two devices, give one device's
// losses and parameters over the same micro-batches.
TEST(StrategyExecutorTest, StagesOverSeveralDevicesMatchOneDevice) {
  const Cluster cluster = Cpus(4);
  std::vector<Model> models = Models({"bn_cnn.op13"});
  for (Model& m : models) {
    SCOPED_TRACE(m.name);
    TrainingView view = BuildTrainingView(m.graph);
    const int micro_batches = 4;
    Trajectory one = RunStrategy(view, cluster, OneDevice(view, micro_batches));

    Strategy hybrid = OneDevice(view, micro_batches);
    hybrid.slot_of_op = AlternatingSlots(view);
    hybrid.stages = {PipelineStage::OfReplicas({{0, 1}, {2, 3}})};
    ASSERT_EQ(DescribeStrategy(hybrid),
              "1 stage x 2 replicas of 2 devices, 4 micro-batches, 1f1b, ring");
    ExpectSame(one, RunStrategy(view, cluster, hybrid), 1e-5);

    absl::StatusOr<Strategy> pipeline =
        Searched(view, Cpus(2), Parallelism::kPipeline, micro_batches);
    ASSERT_TRUE(pipeline.ok()) << pipeline.status();
    ASSERT_EQ(pipeline->stages.size(), 2u);
    Strategy wide = *pipeline;
    wide.slot_of_op = AlternatingSlots(view);
    for (int g = 0; g < view.num_groups(); ++g) {
      if (wide.stage_of_op[g] == 1) wide.slot_of_op[g] = 0;
    }
    wide.stages = {PipelineStage::OfReplicas({{0, 1}}),
                   PipelineStage::OneDevicePerReplica({2})};
    for (PipelineSchedule schedule :
         {PipelineSchedule::kGPipe, PipelineSchedule::k1F1B}) {
      SCOPED_TRACE(ScheduleName(schedule));
      wide.schedule = schedule;
      ExpectSame(one, RunStrategy(view, cluster, wide), 1e-5);
    }
  }
}

// A strategy's step reports each node's runs where they ran: once per
// micro-batch, on the device of its replica's slot; updates once per
// replica; copies between the slots of a replica as transfers. Its
// profile prices every node of the view.
TEST(StrategyExecutorTest, EveryNodeRunIsReportedOnTheDeviceThatRanIt) {
  const Cluster cluster = Cpus(4);
  std::vector<Model> models = Models({"bn_cnn.op13"});
  TrainingView view = BuildTrainingView(models[0].graph);
  const int micro_batches = 4;
  Strategy hybrid = OneDevice(view, micro_batches);
  hybrid.slot_of_op = AlternatingSlots(view);
  hybrid.stages = {PipelineStage::OfReplicas({{0, 1}, {2, 3}})};
  absl::StatusOr<std::unique_ptr<StrategyExecutor>> e =
      StrategyExecutor::Create(view, cluster, hybrid);
  ASSERT_TRUE(e.ok()) << e.status();
  absl::StatusOr<StepReport> r = (*e)->Step();
  ASSERT_TRUE(r.ok()) << r.status();
  std::map<std::pair<int, int>, int> runs;  // (node, device) -> count
  for (const NodeRun& run : r->node_runs) {
    EXPECT_GE(run.seconds, 0);
    ++runs[{run.node, run.device}];
  }
  int expected_pairs = 0;
  for (int n = 0; n < static_cast<int>(view.nodes().size()); ++n) {
    const TrainingNode& node = view.node(n);
    const int slot = SlotOfOp(hybrid, node.forward_op);
    for (int replica = 0; replica < 2; ++replica) {
      const int device = hybrid.stages[0].device(replica, slot);
      // Micro-batches j and j + 2 go to a replica; its update once.
      const int want = node.kind == NodeKind::kUpdate ? 1 : 2;
      EXPECT_EQ(runs[std::make_pair(n, device)], want)
          << node.key << " on " << device;
      ++expected_pairs;
    }
  }
  EXPECT_EQ(runs.size(), static_cast<size_t>(expected_pairs));
  // Each replica's slots read each other's values: copies within
  // replicas, none across them.
  ASSERT_FALSE(r->transfers.empty());
  for (const MeasuredTransfer& t : r->transfers) {
    EXPECT_EQ(t.src / 2, t.dst / 2) << t.src << " -> " << t.dst;
    EXPECT_NE(t.src, t.dst);
    EXPECT_GT(t.bytes, 0);
    EXPECT_GE(t.seconds, 0);
  }
  // One replica (no allreduce): the copies are the ones the simulator
  // lowers (values, weights and gradient buffers on the links, a slot's
  // buffer of a weight's gradient for its update's slot among them).
  Strategy one = hybrid;
  one.stages = {PipelineStage::OfReplicas({{0, 1}})};
  absl::StatusOr<std::unique_ptr<StrategyExecutor>> alone =
      StrategyExecutor::Create(view, cluster, one);
  ASSERT_TRUE(alone.ok()) << alone.status();
  absl::StatusOr<StepReport> ran = (*alone)->Step();
  ASSERT_TRUE(ran.ok()) << ran.status();
  std::unique_ptr<CostModel> costs = NewRooflineCostModel();
  std::unique_ptr<ReadyOrder> order = NewCriticalPathReadyOrder();
  SimulationContext context =
      SimulationContext::Create(view, cluster, *costs, *order);
  absl::StatusOr<StrategySimulation> simulated = SimulateStrategy(context, one);
  ASSERT_TRUE(simulated.ok()) << simulated.status();
  int weight_gradients = 0;  // copies of a weight's gradient buffer
  for (const MeasuredTransfer& t : ran->transfers) {
    const int sm = view.sum_of(t.value);
    weight_gradients +=
        sm >= 0 &&
        view.node(view.gradient_sums()[sm].sink).kind == NodeKind::kUpdate;
  }
  EXPECT_GT(weight_gradients, 0);
  EXPECT_EQ(static_cast<int>(ran->transfers.size()),
            simulated->step.transfers_count);
  int64_t bytes = 0;
  for (const MeasuredTransfer& t : ran->transfers) bytes += t.bytes;
  EXPECT_EQ(bytes, simulated->step.bytes_moved);
  MeasureOptions options;
  options.steps = 1;
  options.warmup = 0;
  absl::StatusOr<Measurement> m = MeasureSteps(**e, options);
  ASSERT_TRUE(m.ok()) << m.status();
  MeasuredProfile profile = ProfileFromMeasurement(view, cluster, *m);
  for (int n = 0; n < static_cast<int>(view.nodes().size()); ++n) {
    EXPECT_TRUE(profile.ops.count({NodeSignature(view, n), DeviceKind::kCpu}))
        << view.node(n).key;
  }
}

// A step's hand-offs: each time a worker that waited was given work by
// another thread (a wide replica's node made ready by another slot's
// node or copy), the seconds until it started on it. None on one device
// (nobody gives it work); some, each within the step, when every other op
// is on the replica's second device; and a measurement's profile prices
// them.
TEST(StrategyExecutorTest, HandOffsAreReportedWhereAnotherThreadGaveWork) {
  const Cluster cluster = Cpus(2);
  std::vector<Model> models = Models({"bn_cnn.op13"});
  TrainingView view = BuildTrainingView(models.back().graph);
  const Strategy one = OneDevice(view, 2);
  Strategy wide = one;
  wide.slot_of_op = AlternatingSlots(view);
  wide.stages = {PipelineStage::OfReplicas({{0, 1}})};
  absl::StatusOr<std::unique_ptr<StrategyExecutor>> alone =
      StrategyExecutor::Create(view, cluster, one);
  ASSERT_TRUE(alone.ok()) << alone.status();
  absl::StatusOr<StepReport> r = (*alone)->Step();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->handoff_seconds.empty());
  absl::StatusOr<std::unique_ptr<StrategyExecutor>> e =
      StrategyExecutor::Create(view, cluster, wide);
  ASSERT_TRUE(e.ok()) << e.status();
  r = (*e)->Step();
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_FALSE(r->handoff_seconds.empty());
  for (double seconds : r->handoff_seconds) {
    EXPECT_GE(seconds, 0);
    EXPECT_LT(seconds, r->seconds);
  }
  MeasureOptions options;
  options.steps = 2;
  options.warmup = 0;
  absl::StatusOr<Measurement> m = MeasureSteps(**e, options);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_GT(ProfileFromMeasurement(view, cluster, *m).handoff_seconds, 0);
}

// A wide stage's slot takes its ready nodes by priority (the simulation
// context's, as run passes them), else in the view's order: x feeds B
// (an output) and A -> C -> D (an output), B and A on slot 0; the view's
// order is B, A; A's path is the longer, so with the critical path's
// priorities slot 0 runs A first, without them B.
TEST(StrategyExecutorTest, AWideStagesSlotsRunTheirReadyNodesByPriority) {
  absl::StatusOr<Graph> graph =
      ImportOnnxModel(testing::ForkOfFourMatMuls(), "fork", {});
  ASSERT_TRUE(graph.ok()) << graph.status();
  TrainingView view = BuildTrainingView(*graph);
  const Cluster cluster = Cpus(2);
  Strategy s;
  s.stage_of_op = {0, 0, 0, 0};
  s.slot_of_op = {0, 0, 1, 1};  // B, A, C, D
  s.stages = {PipelineStage::OfReplicas({{0, 1}})};
  std::unique_ptr<CostModel> costs = NewRooflineCostModel();
  std::unique_ptr<ReadyOrder> order = NewCriticalPathReadyOrder();
  SimulationContext context =
      SimulationContext::Create(view, cluster, *costs, *order);
  for (bool prioritized : {true, false}) {
    SCOPED_TRACE(prioritized ? "the context's priorities" : "none");
    std::mutex mu;
    std::vector<std::string> ran;
    ExecutorOptions options;
    if (prioritized) options.priorities = context.priorities();
    options.before_node = [&](const TrainingNode& node) {
      std::lock_guard<std::mutex> lock(mu);
      ran.push_back(node.key);
      return absl::OkStatus();
    };
    absl::StatusOr<std::unique_ptr<StrategyExecutor>> e =
        StrategyExecutor::Create(view, cluster, s, options);
    ASSERT_TRUE(e.ok()) << e.status();
    ASSERT_TRUE((*e)->Step().ok());
    const auto a = std::find(ran.begin(), ran.end(), "A");
    const auto b = std::find(ran.begin(), ran.end(), "B");
    ASSERT_NE(a, ran.end());
    ASSERT_NE(b, ran.end());
    EXPECT_EQ(a < b, prioritized);
  }
}

// What a device's threads allocate is held to its memory_bytes, as the
// tracked memory is: within the strategy's memory timeline's prediction
// (runtime/pass_memory.h, which fails a pass before it runs), the first
// node allocates 1 MB more than the timeline knows of, and the step fails
// after that node, naming the device and the micro-batch.
TEST(StrategyExecutorTest, AllocationsOverTheLimitFailTheStepNamingTheDevice) {
  Graph graph = Gnmt2();
  TrainingView view = BuildTrainingView(graph);
  const Strategy s = OneDevice(view, 2);
  ExecutorOptions options;
  options.measure_allocations = true;
  int64_t predicted = 0, allocated = 0;
  {
    auto roomy = StrategyExecutor::Create(view, Cpus(1), s, options);
    ASSERT_TRUE(roomy.ok()) << roomy.status();
    absl::StatusOr<StepReport> r = (*roomy)->Step();
    ASSERT_TRUE(r.ok()) << r.status();
    predicted = r->peak_memory_bytes[0];
    allocated = r->allocated_peak_bytes[0];
  }
  ASSERT_GT(predicted, 0);
  const int64_t limit = std::max(predicted, allocated) + (int64_t{1} << 19);
  std::vector<torch::Tensor> held;  // the first node's extra megabyte
  options.before_node = [&held](const TrainingNode&) {
    if (held.empty()) held.push_back(torch::zeros({int64_t{1} << 18}));
    return absl::OkStatus();
  };
  auto e = StrategyExecutor::Create(view, Cpus(1, limit), s, options);
  ASSERT_TRUE(e.ok()) << e.status();
  absl::StatusOr<StepReport> r = (*e)->Step();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted);
  const std::string message(r.status().message());
  EXPECT_NE(message.find("out of memory: /cpu:0 held "), std::string::npos)
      << message;
  EXPECT_NE(message.find("(micro-batch 0)"), std::string::npos) << message;
  // Not enforced: the same step runs.
  held.clear();
  options.enforce_memory = false;
  auto free = StrategyExecutor::Create(view, Cpus(1, limit), s, options);
  ASSERT_TRUE(free.ok()) << free.status();
  absl::StatusOr<StepReport> ran = (*free)->Step();
  ASSERT_TRUE(ran.ok()) << ran.status();
  EXPECT_GT(ran->allocated_peak_bytes[0], limit);
}

TEST(StrategyExecutorTest, AStrategyThatDoesNotFitIsRefused) {
  Graph graph = Gnmt2();
  TrainingView view = BuildTrainingView(graph);
  Strategy s = OneDevice(view, 2);
  s.stages[0] = PipelineStage::OneDevicePerReplica({0, 1, 2});
  absl::StatusOr<std::unique_ptr<StrategyExecutor>> e =
      StrategyExecutor::Create(view, Cpus(2), s);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("names device 2"), std::string::npos)
      << e.status();
}

}  // namespace
}  // namespace placer
