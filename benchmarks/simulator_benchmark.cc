// Simulator speed on a training view of 100k+ nodes (GNMT-8 unrolled over
// 220 steps on 4 P100s). Run:
//   bazel run //benchmarks:simulator_benchmark
// BM_LinearPass is the baseline measured in the same run: one pass that
// reads every node's time and every edge, the least any simulator must do.
#include <memory>
#include <random>

#include "benchmark/benchmark.h"
#include "benchmarks/large_view.h"

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

}  // namespace
}  // namespace placer

BENCHMARK_MAIN();
