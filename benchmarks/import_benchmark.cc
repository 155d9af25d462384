// Import speed of large graphs. Run:
//   bazel run //benchmarks:import_benchmark
// BM_Parse is the baseline measured in the same run: protobuf parsing
// alone, which no importer can beat; report import time as a ratio to it.
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "benchmark/benchmark.h"
#include "graph/onnx_import.h"
#include "graph/training_view.h"
#include "onnx/onnx_pb.h"
#include "zoo/zoo.h"

namespace placer {
namespace {

// GNMT-8 at its default sizes (12.6k ops); range(0) = 1 with weights.
const std::string& Gnmt8Bytes(bool weights) {
  static std::string with, without;
  std::string& bytes = weights ? with : without;
  if (bytes.empty()) {
    zoo::ZooParams p;
    p.weights = weights;
    zoo::BuildZooModel("gnmt8", p)->SerializeToString(&bytes);
  }
  return bytes;
}

void BM_Parse(benchmark::State& state) {
  const std::string& bytes = Gnmt8Bytes(state.range(0) != 0);
  for (auto _ : state) {
    onnx::ModelProto m;
    benchmark::DoNotOptimize(m.ParseFromString(bytes));
  }
  state.SetBytesProcessed(state.iterations() * bytes.size());
}
BENCHMARK(BM_Parse)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

void BM_Import(benchmark::State& state) {
  const std::string& bytes = Gnmt8Bytes(state.range(0) != 0);
  size_t ops = 0;
  for (auto _ : state) {
    absl::StatusOr<Graph> g = ImportOnnxBytes(bytes, "zoo:gnmt8", {});
    if (!g.ok()) {
      state.SkipWithError(std::string(g.status().message()).c_str());
      return;
    }
    ops = g->ops().size();
  }
  state.counters["ops"] = static_cast<double>(ops);
  state.counters["ops_per_second"] = benchmark::Counter(
      static_cast<double>(ops * state.iterations()),
      benchmark::Counter::kIsRate);
}
BENCHMARK(BM_Import)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

void BM_TrainingView(benchmark::State& state) {
  absl::StatusOr<Graph> g = ImportOnnxBytes(Gnmt8Bytes(false), "zoo:gnmt8", {});
  size_t nodes = 0;
  for (auto _ : state) {
    TrainingView v = BuildTrainingView(*g);
    nodes = v.nodes().size();
    benchmark::DoNotOptimize(nodes);
  }
  state.counters["nodes"] = static_cast<double>(nodes);
}
BENCHMARK(BM_TrainingView)->Unit(benchmark::kMillisecond);

// Importing a file from disk, the way `placer inspect FILE` does (streamed),
// against reading the whole file into a string and parsing it from there.
// The file is $PLACER_IMPORT_FILE, or GNMT-8 with its weights (960 MB)
// written to a temporary file. Peak memory is per process: run each alone
// under /usr/bin/time (docs/import.md), with
//   /usr/bin/time -f "%e s %M KB" bazel-bin/benchmarks/import_benchmark
// and --benchmark_filter=BM_ImportFile/0 (streamed) or
// --benchmark_filter=BM_ImportFile/1 (read into a string first).
const std::string& ImportFilePath() {
  static const std::string* path = [] {
    if (const char* env = std::getenv("PLACER_IMPORT_FILE");
        env != nullptr && *env != 0) {
      return new std::string(env);
    }
    auto* p = new std::string(std::string(std::getenv("TMPDIR") != nullptr
                                              ? std::getenv("TMPDIR")
                                              : "/tmp") +
                              "/placer_import_benchmark_gnmt8.onnx");
    zoo::ZooParams params;  // not Gnmt8Bytes: its bytes would stay resident
    std::string bytes;
    zoo::BuildZooModel("gnmt8", params)->SerializeToString(&bytes);
    std::ofstream(*p, std::ios::binary) << bytes;
    return p;
  }();
  return *path;
}

void BM_ImportFile(benchmark::State& state) {
  const std::string& path = ImportFilePath();
  const bool via_string = state.range(0) != 0;
  size_t ops = 0;
  for (auto _ : state) {
    absl::StatusOr<Graph> g;
    if (via_string) {
      std::ifstream in(path, std::ios::binary);
      std::ostringstream buffer;
      buffer << in.rdbuf();
      g = ImportOnnxBytes(buffer.str(), path, {});
    } else {
      g = ImportOnnxFile(path, {});
    }
    if (!g.ok()) {
      state.SkipWithError(std::string(g.status().message()).c_str());
      return;
    }
    ops = g->ops().size();
  }
  state.counters["ops"] = static_cast<double>(ops);
  state.SetBytesProcessed(state.iterations() *
                          static_cast<int64_t>(std::ifstream(
                              path, std::ios::binary | std::ios::ate)
                                                   .tellg()));
}
BENCHMARK(BM_ImportFile)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)
    ->Iterations(3);

}  // namespace
}  // namespace placer

BENCHMARK_MAIN();
