// Simulator speed on a training view of 100k+ nodes (GNMT-8 unrolled over
// 220 steps on 4 P100s). Run:
//   bazel run //benchmarks:simulator_benchmark
// BM_LinearPass is the baseline measured in the same run: one pass that
// reads every node's time and every edge, the least any simulator must do.
#include <memory>
#include <random>

#include "benchmark/benchmark.h"
#include "graph/onnx_import.h"
#include "graph/training_view.h"
#include "placer/simulator.h"
#include "profiles/cluster.h"
#include "profiles/cost_model.h"
#include "zoo/zoo.h"

namespace placer {
namespace {

struct Setup {
  Graph graph;
  TrainingView view;
  Cluster cluster;
  std::unique_ptr<CostModel> costs;
  std::unique_ptr<ReadyOrder> order;
  std::unique_ptr<SimulationContext> context;
  Placement layers, random;
};

const Setup& Get() {
  static Setup* s = [] {
    auto* s = new Setup;
    zoo::ZooParams p;
    p.weights = false;
    p.seq_len = 220;
    s->graph = *ImportOnnxModel(*zoo::BuildZooModel("gnmt8", p), "gnmt8", {});
    s->view = BuildTrainingView(s->graph);
    s->cluster = *LoadCluster("p100x4");
    s->costs = NewRooflineCostModel();
    s->order = NewCriticalPathReadyOrder();
    s->context = std::make_unique<SimulationContext>(SimulationContext::Create(
        s->view, s->cluster, *s->costs, *s->order));
    const int n = static_cast<int>(s->graph.ops().size());
    s->layers.device_of_op.resize(n);
    for (int k = 0; k < n; ++k) {
      s->layers.device_of_op[s->graph.topological_order()[k]] = k * 4 / n;
    }
    std::mt19937 rng(1);
    s->random.device_of_op.resize(n);
    for (int& d : s->random.device_of_op) d = rng() % 4;
    return s;
  }();
  return *s;
}

void BM_LinearPass(benchmark::State& state) {
  const Setup& s = Get();
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
  const Setup& s = Get();
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
  Run(state, Get().layers);
}
BENCHMARK(BM_SimulateLayerPlacement)->Unit(benchmark::kMillisecond);

void BM_SimulateRandomPlacement(benchmark::State& state) {
  Run(state, Get().random);
}
BENCHMARK(BM_SimulateRandomPlacement)->Unit(benchmark::kMillisecond);

void BM_CreateContext(benchmark::State& state) {
  const Setup& s = Get();
  for (auto _ : state) {
    SimulationContext c =
        SimulationContext::Create(s.view, s.cluster, *s.costs, *s.order);
    benchmark::DoNotOptimize(c);
  }
}
BENCHMARK(BM_CreateContext)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace placer

BENCHMARK_MAIN();
