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
#include "benchmarks/large_view.h"
#include "policies/policy.h"

namespace placer {
namespace {

void BM_Simulate(benchmark::State& state) {
  const LargeView& s = GetLargeView("h100x8");
  for (auto _ : state) {
    absl::StatusOr<SimulationResult> r = Simulate(*s.context, s.layers);
    benchmark::DoNotOptimize(r);
  }
  state.counters["nodes"] = s.context->num_nodes();
}
BENCHMARK(BM_Simulate)->Unit(benchmark::kMillisecond);

void BM_Place(benchmark::State& state, const std::string& name) {
  const LargeView& s = GetLargeView("h100x8");
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
