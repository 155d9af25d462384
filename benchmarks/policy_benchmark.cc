// Placement time of every heuristic (all policies but the searches) on a
// training view of 100k+ nodes: GNMT-8 unrolled over 220 steps on 8 H100s.
// Run:
//   bazel run //benchmarks:policy_benchmark
// Each policy's time includes the validating simulation every policy ends
// with; BM_Simulate (one simulation of a layer-wise placement) is the
// baseline measured in the same run, so the ratio to it says how much work
// a policy does beyond checking its answer. The target: under a
// second each.
#include <memory>
#include <string>

#include "benchmark/benchmark.h"
#include "graph/onnx_import.h"
#include "graph/training_view.h"
#include "placer/simulator.h"
#include "policies/policy.h"
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
  Placement layers;
};

const Setup& Get() {
  static Setup* s = [] {
    auto* s = new Setup;
    zoo::ZooParams p;
    p.weights = false;
    p.seq_len = 220;
    s->graph = *ImportOnnxModel(*zoo::BuildZooModel("gnmt8", p), "gnmt8", {});
    s->view = BuildTrainingView(s->graph);
    s->cluster = *LoadCluster("h100x8");
    s->costs = NewRooflineCostModel();
    s->order = NewCriticalPathReadyOrder();
    s->context = std::make_unique<SimulationContext>(SimulationContext::Create(
        s->view, s->cluster, *s->costs, *s->order));
    const int n = static_cast<int>(s->graph.ops().size());
    const int devices = s->cluster.num_devices();
    s->layers.device_of_op.resize(n);
    for (int k = 0; k < n; ++k) {
      s->layers.device_of_op[s->graph.topological_order()[k]] =
          k * devices / n;
    }
    return s;
  }();
  return *s;
}

void BM_Simulate(benchmark::State& state) {
  const Setup& s = Get();
  for (auto _ : state) {
    absl::StatusOr<SimulationResult> r = Simulate(*s.context, s.layers);
    benchmark::DoNotOptimize(r);
  }
  state.counters["nodes"] = s.context->num_nodes();
}
BENCHMARK(BM_Simulate)->Unit(benchmark::kMillisecond);

void BM_Place(benchmark::State& state, const std::string& name) {
  const Setup& s = Get();
  PolicyInput input{s.view, s.cluster, *s.costs, *s.context};
  PolicyOptions options;
  for (auto _ : state) {
    absl::StatusOr<std::unique_ptr<PlacementPolicy>> policy = NewPolicy(name);
    absl::StatusOr<Placement> p = (*policy)->Place(input, options);
    if (!p.ok()) {
      state.SkipWithError(std::string(p.status().message()).c_str());
      break;
    }
    benchmark::DoNotOptimize(p);
  }
  state.counters["nodes"] = s.context->num_nodes();
}

int Register() {
  for (const char* name : {"single", "expert", "hash", "critical_path",
                           "metis", "heft", "m_etf", "m_sct", "m_topo"}) {
    benchmark::RegisterBenchmark((std::string("BM_Place/") + name).c_str(),
                                 BM_Place, std::string(name))
        ->Unit(benchmark::kMillisecond);
  }
  return 0;
}
const int registered = Register();

}  // namespace
}  // namespace placer

BENCHMARK_MAIN();
