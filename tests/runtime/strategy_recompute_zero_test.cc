// The strategy executor against one device where it saves memory:
// recomputing stages (whole, in part, layer by layer) and ZeRO give one
// device's losses and parameters and allocate less, as simulated; what it
// cannot recompute is refused by name. The rest: strategy_executor_test.cc.
#include <algorithm>
#include <cmath>
#include <cstdio>
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
#include "runtime/strategy_executor.h"
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

// Recomputing stages (every stage of the searched pipeline, GPipe and
// 1F1B; the whole model as one stage) give one device's losses and
// parameters: the rerun rebuilds what each op saves for its backward from
// the stage's kept inputs. On GNMT-2, the Transformer, a BatchNorm CNN
// and PyTorch's training-mode Llama-style decoder export.
TEST(StrategyExecutorTest, RecomputingStagesMatchOneDevice) {
  const Cluster cluster = Cpus(2);
  std::vector<Model> models = ModelsAndLlama({"bn_cnn.op13"});
  for (Model& m : models) {
    SCOPED_TRACE(m.name);
    TrainingView view = BuildTrainingView(m.graph);
    const int micro_batches = 4;
    Trajectory one = RunStrategy(view, cluster, OneDevice(view, micro_batches));
    Strategy whole = OneDevice(view, micro_batches);
    whole.stages[0].recompute = Recompute::kFull;
    ExpectSame(one, RunStrategy(view, cluster, whole), 1e-5);
    absl::StatusOr<Strategy> pipeline =
        Searched(view, cluster, Parallelism::kPipeline, micro_batches);
    ASSERT_TRUE(pipeline.ok()) << pipeline.status();
    for (PipelineSchedule schedule :
         {PipelineSchedule::kGPipe, PipelineSchedule::k1F1B}) {
      SCOPED_TRACE(ScheduleName(schedule));
      Strategy s = *pipeline;
      s.schedule = schedule;
      for (PipelineStage& stage : s.stages) stage.recompute = Recompute::kFull;
      ExpectSame(one, RunStrategy(view, cluster, s), 1e-5);
    }
  }
}

// Simulated against allocated peaks (the second step's).
std::vector<std::pair<int64_t, int64_t>> SimulatedAndAllocated(
    const TrainingView& view, const Cluster& cluster, const Strategy& s) {
  std::unique_ptr<CostModel> costs = NewRooflineCostModel();
  std::unique_ptr<ReadyOrder> order = NewCriticalPathReadyOrder();
  SimulationContext context =
      SimulationContext::Create(view, cluster, *costs, *order);
  absl::StatusOr<StrategySimulation> sim = SimulateStrategy(context, s);
  EXPECT_TRUE(sim.ok()) << sim.status();
  ExecutorOptions options;
  options.measure_allocations = true;
  absl::StatusOr<std::unique_ptr<StrategyExecutor>> e =
      StrategyExecutor::Create(view, cluster, s, options);
  EXPECT_TRUE(e.ok()) << e.status();
  std::vector<std::pair<int64_t, int64_t>> out;
  if (!sim.ok() || !e.ok()) return out;
  absl::StatusOr<StepReport> r;
  for (int step = 0; step < 2; ++step) {
    r = (*e)->Step();
    EXPECT_TRUE(r.ok()) << r.status();
    if (!r.ok()) return out;
  }
  for (int d = 0; d < cluster.num_devices(); ++d) {
    out.push_back({sim->step.peak_memory_bytes[d], r->allocated_peak_bytes[d]});
  }
  return out;
}

// What LibTorch allocates (measure_allocations, the second step) against
// the strategy simulator's peaks, on GNMT-2, the Transformer and PyTorch's
// Llama-style decoder export cut into two stages of 4 micro-batches on two
// CPUs: recomputing lowers the allocated peak of every stage under GPipe
// (four micro-batches in flight on both stages), as the simulator says,
// and the simulated peaks are within 7% of the allocated ones (measured
// 0.97-1.03). GPipe without recomputation was overestimated by up to 16%
// (the Transformer's first stage: 81.5 MB simulated, 70.8 MB allocated)
// while the simulator counted every stash beside the accumulators and a
// later micro-batch's peak: under GPipe the first backward runs with
// every stash and no accumulator, a later one with the accumulators and
// a stash fewer (simulator/strategy_memory.h).
TEST(StrategyExecutorTest, RecomputationLowersTheAllocatedPeakAsSimulated) {
  const Cluster cluster = Cpus(2);
  std::vector<Model> models = ModelsAndLlama({});
  for (Model& m : models) {
    SCOPED_TRACE(m.name);
    TrainingView view = BuildTrainingView(m.graph);
    absl::StatusOr<Strategy> pipeline =
        Searched(view, cluster, Parallelism::kPipeline, 4);
    ASSERT_TRUE(pipeline.ok()) << pipeline.status();
    for (PipelineSchedule schedule :
         {PipelineSchedule::kGPipe, PipelineSchedule::k1F1B}) {
      std::vector<std::vector<std::pair<int64_t, int64_t>>> peaks;
      for (Recompute recompute : {Recompute::kNone, Recompute::kFull}) {
        Strategy s = *pipeline;
        s.schedule = schedule;
        for (PipelineStage& stage : s.stages) stage.recompute = recompute;
        SCOPED_TRACE(DescribeStrategy(s));
        peaks.push_back(SimulatedAndAllocated(view, cluster, s));
        ASSERT_EQ(peaks.back().size(), 2u);
        for (int d = 0; d < 2; ++d) {
          const auto [simulated, allocated] = peaks.back()[d];
          const double ratio = static_cast<double>(simulated) / allocated;
          EXPECT_GE(ratio, 0.93) << "device " << d;
          EXPECT_LE(ratio, 1.07) << "device " << d;
        }
      }
      if (schedule != PipelineSchedule::kGPipe) continue;
      for (int d = 0; d < 2; ++d) {
        EXPECT_LT(peaks[1][d].first, peaks[0][d].first) << "device " << d;
        EXPECT_LT(peaks[1][d].second, peaks[0][d].second) << "device " << d;
      }
    }
  }
}

// Recomputation in part (--recompute layers: each repeated layer keeps
// its input and output; selective-op: also its attention cores and every
// other product; selective: every op without a weight rerun, each when a
// backward first needs it) on decoders: PyTorch's Llama-style export and
// the zoo's GPT and Llama. Two replicas of 4 micro-batches, and two stages
// under 1F1B and GPipe, and two replicas with ZeRO-3: one device's losses
// and parameters. What a kept op saved of a rerun's making is parked from
// the forward to the rerun, as the simulator counts it. The allocated peaks
// of stages holding more than 512 KB are within -15%/+20% of the
// simulated ones (measured 0.91-1.07 without ZeRO-3; with it 0.95-1.09,
// and 1.08-1.14 by layer: the simulator counts a layer's
// rerun gathering its weights whole and holding them through its
// backward with the next layer's gather in flight, FSDP's prefetch, which
// the executor's rerun does not start). Under GPipe the allocated peaks
// fall with each layer recomputed where the simulated ones do.
TEST(StrategyExecutorTest, RecomputingInPartMatchesOneDevice) {
  const Cluster cluster = Cpus(2);
  std::vector<Model> models = ModelsAndLlama({});
  models.erase(models.begin(), models.end() - 1);  // the Llama export
  for (const char* name : {"gpt", "llama"}) {
    absl::StatusOr<Graph> g = SmallDecoder(name, 32);
    ASSERT_TRUE(g.ok()) << g.status();
    models.push_back({name, *std::move(g)});
  }
  for (Model& m : models) {
    SCOPED_TRACE(m.name);
    TrainingView view = BuildTrainingView(m.graph);
    Trajectory one = RunStrategy(view, cluster, OneDevice(view, 4));
    Strategy data = OneDevice(view, 4);
    data.stages[0] = PipelineStage::OneDevicePerReplica({0, 1});
    absl::StatusOr<Strategy> pipeline =
        Searched(view, cluster, Parallelism::kPipeline, 4);
    ASSERT_TRUE(pipeline.ok()) << pipeline.status();
    Strategy gpipe = *pipeline;
    gpipe.schedule = PipelineSchedule::kGPipe;
    pipeline->schedule = PipelineSchedule::k1F1B;
    // ZeRO-3 too (a layer's rerun gathers its weights again, at once).
    Strategy sharded = data;
    sharded.zero = ZeroStage::kParameters;
    for (const Strategy& plan : {data, *pipeline, gpipe, sharded}) {
      std::vector<std::vector<std::pair<int64_t, int64_t>>> peaks;
      for (Recompute recompute :
           {Recompute::kNone, Recompute::kLayers, Recompute::kSelectiveOp,
            Recompute::kSelective}) {
        Strategy s = plan;
        for (PipelineStage& stage : s.stages) stage.recompute = recompute;
        SCOPED_TRACE(DescribeStrategy(s));
        if (recompute != Recompute::kNone) {
          ExpectSame(one, RunStrategy(view, cluster, s), 1e-5);
        }
        peaks.push_back(SimulatedAndAllocated(view, cluster, s));
        ASSERT_EQ(peaks.back().size(), 2u);
        if (recompute == Recompute::kNone) continue;
        for (int d = 0; d < 2; ++d) {
          const auto [simulated, allocated] = peaks.back()[d];
          if (allocated < (int64_t{1} << 19)) continue;  // a stage of bytes
          const double ratio = static_cast<double>(simulated) / allocated;
          EXPECT_GE(ratio, 0.85) << "device " << d;
          EXPECT_LE(ratio, 1.2) << "device " << d;
        }
      }
      if (plan.schedule != PipelineSchedule::kGPipe) continue;
      // Four micro-batches in flight: where the simulated peak falls by a
      // tenth with each layer recomputed, so does the allocated one.
      for (int d = 0; d < 2; ++d) {
        if (peaks[1][d].first > 0.9 * peaks[0][d].first) continue;
        EXPECT_LT(peaks[1][d].second, peaks[0][d].second) << "device " << d;
      }
    }
  }
}

// ZeRO over two replicas (data parallel, 4 micro-batches). ZeRO-1: each
// replica updates its shard of every parameter (its optimizer state only)
// and copies the others' shards once they have updated. ZeRO-2 and ZeRO-3: each
// replica's gradients go, each as it completes, to the replicas holding
// their shards, summed round by round (ZeRO-3: the parameters gathered
// from the shards for each pass, the saved copies' storage freed from the
// forward to the backward). Each: one device's losses and parameters, and
// what each device allocates within 10% of the simulated peak. ZeRO-1
// allocates less than without by about the state that went, as
// simulated; ZeRO-2 and ZeRO-3 less than ZeRO-1, both ways (GNMT-2: 630
// KB allocated with ZeRO-1, 548-569 with ZeRO-2 (578 while cut at the
// backward's end), 537-546 with ZeRO-3; simulated 630, 540 and 566: the
// simulator's ZeRO-3 holds its gathered window and the next gather at its
// peak).
TEST(StrategyExecutorTest, ZeroMatchesOneDeviceAndHoldsLess) {
  const Cluster cluster = Cpus(2);
  std::vector<Model> models = ModelsAndLlama({});
  for (Model& m : models) {
    SCOPED_TRACE(m.name);
    TrainingView view = BuildTrainingView(m.graph);
    Trajectory one = RunStrategy(view, cluster, OneDevice(view, 4));
    Strategy data = OneDevice(view, 4);
    data.stages[0] = PipelineStage::OneDevicePerReplica({0, 1});
    // Per ZeRO stage (none, 1, 2, 3), per device: simulated, allocated.
    std::vector<std::vector<std::pair<int64_t, int64_t>>> peaks;
    for (ZeroStage zero : {ZeroStage::kNone, ZeroStage::kOptimizerState,
                           ZeroStage::kGradients, ZeroStage::kParameters}) {
      Strategy sharded = data;
      sharded.zero = zero;
      SCOPED_TRACE(DescribeStrategy(sharded));
      if (zero != ZeroStage::kNone) {
        ExpectSame(one, RunStrategy(view, cluster, sharded), 1e-5);
      }
      peaks.push_back(SimulatedAndAllocated(view, cluster, sharded));
      ASSERT_EQ(peaks.back().size(), 2u);
      for (int d = 0; d < 2; ++d) {
        const auto [simulated, allocated] = peaks.back()[d];
        // The figures docs/memory_and_sharding.md quotes.
        std::printf("%s zero-%d device %d: allocated %lld, simulated %lld\n",
                    m.name.c_str(), static_cast<int>(zero), d,
                    static_cast<long long>(allocated),
                    static_cast<long long>(simulated));
        const double ratio = static_cast<double>(simulated) / allocated;
        EXPECT_GE(ratio, 0.9) << "device " << d;
        EXPECT_LE(ratio, 1.1) << "device " << d;
      }
    }
    for (int d = 0; d < 2; ++d) {
      SCOPED_TRACE(::testing::Message() << "device " << d);
      // The state that went: the Transformer 8.89 MB simulated, 10.3
      // allocated (8.89 when the executor added a micro-batch's gradients
      // at its backward's end: since each is added as it completes, the
      // ZeRO-1 step's allocated peak fell 1.5 MB more than the other's).
      const int64_t simulated = peaks[0][d].first - peaks[1][d].first;
      const int64_t allocated = peaks[0][d].second - peaks[1][d].second;
      EXPECT_GT(allocated, 0);
      EXPECT_GE(static_cast<double>(allocated), 0.9 * simulated);
      EXPECT_LE(static_cast<double>(allocated), 1.2 * simulated);
      for (int z : {2, 3}) {
        EXPECT_LT(peaks[z][d].first, peaks[1][d].first) << "ZeRO-" << z;
        EXPECT_LT(peaks[z][d].second, peaks[1][d].second) << "ZeRO-" << z;
      }
    }
  }
}

// ZeRO-1 over two replicas of a GPT whose embedding (tied to its output
// layer) is most of its parameters (30,000 x 64: 1.92M of some 2.0M): each
// replica updates its half of every parameter and holds that half's
// optimizer state, as the simulator counts 1/R of the state on each, so
// the two devices allocate alike and as simulated, and each replica's
// shards joined are the parameters. Dealing whole parameters to replicas
// instead (PyTorch's ZeroRedundancyOptimizer) allocated 45.5 and 38.6 MiB
// against 42.2 simulated on each (placer run, 2026-12-03).
TEST(StrategyExecutorTest, ZeroOneHoldsItsShardOfEveryParametersState) {
  const Cluster cluster = Cpus(2);
  zoo::ZooParams p;
  p.layers = 2;
  p.hidden = 64;
  p.heads = 2;
  p.ffn = 256;
  p.seq_len = 16;
  p.vocab = 30000;
  p.batch_size = 4;
  absl::StatusOr<onnx::ModelProto> m = zoo::BuildZooModel("gpt", p);
  ASSERT_TRUE(m.ok()) << m.status();
  absl::StatusOr<Graph> graph = ImportOnnxModel(*m, "zoo:gpt", {});
  ASSERT_TRUE(graph.ok()) << graph.status();
  TrainingView view = BuildTrainingView(*graph);
  Strategy data = OneDevice(view, 4);
  data.stages[0] = PipelineStage::OneDevicePerReplica({0, 1});
  Strategy zero = data;
  zero.zero = ZeroStage::kOptimizerState;
  ExpectSame(RunStrategy(view, cluster, data), RunStrategy(view, cluster, zero),
             1e-5);
  const std::vector<std::pair<int64_t, int64_t>> peaks =
      SimulatedAndAllocated(view, cluster, zero);
  ASSERT_EQ(peaks.size(), 2u);
  for (int d = 0; d < 2; ++d) {
    const auto [simulated, allocated] = peaks[d];
    EXPECT_NEAR(static_cast<double>(allocated), static_cast<double>(simulated),
                0.02 * static_cast<double>(simulated))
        << "device " << d;
  }
  EXPECT_NEAR(static_cast<double>(peaks[0].second),
              static_cast<double>(peaks[1].second),
              0.01 * static_cast<double>(peaks[0].second));

  absl::StatusOr<std::unique_ptr<StrategyExecutor>> e =
      StrategyExecutor::Create(view, cluster, zero);
  ASSERT_TRUE(e.ok()) << e.status();
  ASSERT_TRUE((*e)->Step().ok());
  for (const std::string& name : ParameterNames(view)) {
    SCOPED_TRACE(name);
    absl::StatusOr<torch::Tensor> whole = (*e)->Parameter(name);
    absl::StatusOr<torch::Tensor> first = (*e)->ParameterShard(name, 0);
    absl::StatusOr<torch::Tensor> second = (*e)->ParameterShard(name, 1);
    ASSERT_TRUE(whole.ok() && first.ok() && second.ok());
    EXPECT_LE(std::abs(first->numel() - second->numel()), 1);
    EXPECT_TRUE(
        torch::equal(torch::cat({*first, *second}), whole->reshape({-1})));
  }
}

// Create's error for `s` on two CPUs: Unimplemented, its message holding
// `says`.
void ExpectRefused(const TrainingView& view, const Strategy& s,
                   const std::string& says) {
  absl::StatusOr<std::unique_ptr<StrategyExecutor>> e =
      StrategyExecutor::Create(view, Cpus(2), s);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(e.status().message().find(says), std::string::npos) << e.status();
}

// What the executor cannot run it refuses by name rather than run another
// plan: a recomputing stage over several devices per replica, and a
// recomputing stage with an op that draws random numbers (PyTorch's
// training-mode GPT-2 export: Dropout given a training_mode input).
TEST(StrategyExecutorTest, WhatItCannotRecomputeIsRefusedByName) {
  Graph graph = Gnmt2();
  TrainingView gnmt = BuildTrainingView(graph);
  Strategy wide = OneDevice(gnmt, 2);
  wide.slot_of_op.assign(graph.ops().size(), 0);
  wide.slot_of_op.back() = 1;
  wide.stages[0] = PipelineStage::OfReplicas({{0, 1}});
  wide.stages[0].recompute = Recompute::kFull;
  ExpectRefused(gnmt, wide, "stage 0 recomputes over 2 devices per replica");

  absl::StatusOr<Graph> gpt2 =
      ImportOnnxFile("tests/fixtures/corpus/gpt2.train.op17.onnx", {});
  ASSERT_TRUE(gpt2.ok()) << gpt2.status();
  TrainingView view = BuildTrainingView(*gpt2);
  Strategy s = OneDevice(view, 2);
  s.stages[0].recompute = Recompute::kFull;
  ExpectRefused(view, s, "(Dropout), which draws random numbers");
}

}  // namespace
}  // namespace placer
