// Simulator speed on a training view of 100k+ nodes (GNMT-8 unrolled over
// 220 steps on 4 P100s). Run:
//   bazel run //benchmarks:simulator_benchmark
// BM_LinearPass is the baseline measured in the same run: one pass that
// reads every node's time and every edge, the least any simulator must do.
// BM_SimulateStrategy: ResNet-50 (batch 32) on 8 V100s as 4 pipeline stages
// (ops in topological order cut into four runs) x 2 replicas x 8
// micro-batches, 1F1B. BM_SimulateWideStrategy: the same model as 2
// stages x 2 replicas of 2 devices (a stage's ops dealt to the slots
// alternately in topological order, so most values cross) x 8
// micro-batches.
#include <memory>
#include <random>

#include "benchmark/benchmark.h"
#include "benchmarks/large_view.h"
#include "simulator/strategy_simulator.h"

namespace placer {
namespace {

struct Setup {
  const LargeView& large;
  Placement random;
};

const Setup& Get() {
  static Setup* s = [] {
    const LargeView& large = GetLargeView("p100x4");
    auto* s = new Setup{large, {}};
    std::mt19937 rng(1);
    s->random.device_of_op.resize(large.graph.ops().size());
    for (int& d : s->random.device_of_op) d = rng() % 4;
    return s;
  }();
  return *s;
}

void BM_LinearPass(benchmark::State& state) {
  const LargeView& s = Get().large;
  for (auto _ : state) {
    double total = 0;
    for (int n = 0; n < s.context->num_nodes(); ++n) {
      int d = s.layers.device_of_op[s.view.node(n).forward_op];
      total += s.context->node_seconds(n, d);
      for (int v : s.view.node(n).outputs) {
        total += static_cast<double>(s.view.value(v).consumers.size());
      }
    }
    benchmark::DoNotOptimize(total);
  }
  state.counters["nodes"] = s.context->num_nodes();
}
BENCHMARK(BM_LinearPass)->Unit(benchmark::kMillisecond);

void Run(benchmark::State& state, const Placement& placement) {
  const LargeView& s = Get().large;
  for (auto _ : state) {
    absl::StatusOr<SimulationResult> r = Simulate(*s.context, placement);
    benchmark::DoNotOptimize(r);
  }
  state.counters["nodes"] = s.context->num_nodes();
  state.counters["nodes_per_second"] = benchmark::Counter(
      static_cast<double>(s.context->num_nodes()) * state.iterations(),
      benchmark::Counter::kIsRate);
}

void BM_SimulateLayerPlacement(benchmark::State& state) {
  Run(state, Get().large.layers);
}
BENCHMARK(BM_SimulateLayerPlacement)->Unit(benchmark::kMillisecond);

void BM_SimulateRandomPlacement(benchmark::State& state) {
  Run(state, Get().random);
}
BENCHMARK(BM_SimulateRandomPlacement)->Unit(benchmark::kMillisecond);

void BM_CreateContext(benchmark::State& state) {
  const LargeView& s = Get().large;
  for (auto _ : state) {
    SimulationContext c =
        SimulationContext::Create(s.view, s.cluster, *s.costs, *s.order);
    benchmark::DoNotOptimize(c);
  }
}
BENCHMARK(BM_CreateContext)->Unit(benchmark::kMillisecond);

struct StrategySetup {
  Graph graph;
  TrainingView view;
  Cluster cluster;
  std::unique_ptr<CostModel> costs;
  std::unique_ptr<ReadyOrder> order;
  std::unique_ptr<SimulationContext> context;
  Strategy strategy;
};

// ResNet-50 (batch 32) on 8 V100s, its ops in topological order cut into
// `stages` runs, each stage's replicas `width` devices (ops dealt to the
// slots alternately), as many replicas as the devices allow.
StrategySetup* NewStrategySetup(int stages, int width) {
  auto* s = new StrategySetup;
  zoo::ZooParams p;
  p.weights = false;
  s->graph =
      *ImportOnnxModel(*zoo::BuildZooModel("resnet50", p), "resnet50", {});
  s->view = BuildTrainingView(s->graph);
  s->cluster = *LoadCluster("v100x8");
  s->costs = NewRooflineCostModel();
  s->order = NewCriticalPathReadyOrder();
  s->context = std::make_unique<SimulationContext>(SimulationContext::Create(
      s->view, s->cluster, *s->costs, *s->order));
  const int n = static_cast<int>(s->graph.ops().size());
  s->strategy.stage_of_op.resize(n);
  if (width > 1) s->strategy.slot_of_op.resize(n);
  for (int k = 0; k < n; ++k) {
    const int op = s->graph.topological_order()[k];
    s->strategy.stage_of_op[op] = k * stages / n;
    if (width > 1) s->strategy.slot_of_op[op] = k % width;
  }
  const int per_stage = 8 / stages;
  for (int stage = 0; stage < stages; ++stage) {
    std::vector<std::vector<int>> replicas;
    for (int first = 0; first < per_stage; first += width) {
      std::vector<int> devices;
      for (int slot = 0; slot < width; ++slot) {
        devices.push_back(stage * per_stage + first + slot);
      }
      replicas.push_back(devices);
    }
    s->strategy.stages.push_back(PipelineStage::OfReplicas(replicas));
  }
  s->strategy.micro_batches = 8;
  s->strategy.schedule = PipelineSchedule::k1F1B;
  return s;
}

void SimulateStrategyLoop(benchmark::State& state, const StrategySetup& s) {
  double step = 0;
  for (auto _ : state) {
    absl::StatusOr<StrategySimulation> r =
        SimulateStrategy(*s.context, s.strategy);
    if (!r.ok()) {
      state.SkipWithError(r.status().ToString().c_str());
      return;
    }
    step = r->step.step_seconds;
    benchmark::DoNotOptimize(r);
  }
  state.counters["nodes"] = s.context->num_nodes();
  state.counters["step_ms"] = step * 1e3;
}

void BM_SimulateStrategy(benchmark::State& state) {
  static const StrategySetup* s = NewStrategySetup(4, 1);
  SimulateStrategyLoop(state, *s);
}
BENCHMARK(BM_SimulateStrategy)->Unit(benchmark::kMillisecond);

void BM_SimulateWideStrategy(benchmark::State& state) {
  static const StrategySetup* s = NewStrategySetup(2, 2);
  SimulateStrategyLoop(state, *s);
}
BENCHMARK(BM_SimulateWideStrategy)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace placer

BENCHMARK_MAIN();
