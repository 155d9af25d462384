// The executor's overhead: one training step of zoo:chain (MatMul/Relu
// layers) on one CPU device, against the same network written directly
// with torch::nn (Linear without bias, ReLU, cross-entropy against seeded
// labels — the executor's loss for a [batch, classes] output — and SGD
// with momentum) from the same weights, in the same process and run. Run:
//   bazel run //benchmarks:executor_benchmark
// The ratio BM_Executor/N / BM_TorchNn/N is the overhead (target: <= 1.10)
// at width N: the executor (runtime/strategy_executor.h) running the op
// placement of every op on that device. BM_StrategyOneDevice/N/M runs
// the same model as a strategy of M micro-batches a step on the same
// device: its time / M over BM_Executor/N is the overhead per
// micro-batch. Both use one intra-op thread and the same host settings
// (base/host_setup.h).
#include <map>
#include <memory>

#include "benchmark/benchmark.h"
#include "graph/onnx_import.h"
#include "graph/training_view.h"
#include "profiles/cluster.h"
#include "runtime/executor.h"
#include "runtime/strategy_executor.h"
#include "simulator/strategy.h"
#include "base/host_setup.h"
#include "zoo/zoo.h"

namespace placer {
namespace {

constexpr int64_t kLayers = 8;

struct Setup {
  Graph graph;
  TrainingView view;
  Cluster cluster;
  std::unique_ptr<StrategyExecutor> executor;
  torch::nn::Sequential net;
  std::unique_ptr<torch::optim::SGD> sgd;
  torch::Tensor x, target;  // target: labels
};

// Batch 128 x width 1024 (8 ms products), and batch 32 x width 256 (small
// ops, where a per-node cost would show).
Setup& Get(int64_t hidden) {
  static std::map<int64_t, Setup*>* setups = new std::map<int64_t, Setup*>;
  Setup*& slot = (*setups)[hidden];
  if (slot != nullptr) return *slot;
  const int64_t kHidden = hidden, kBatch = hidden >= 1024 ? 128 : 32;
  slot = [&] {
    auto* s = new Setup;
    zoo::ZooParams p;
    p.batch_size = kBatch;
    p.hidden = kHidden;
    p.layers = kLayers;
    s->graph = *ImportOnnxModel(*zoo::BuildZooModel("chain", p), "chain", {});
    s->view = BuildTrainingView(s->graph);
    s->cluster = *LoadCluster("cpu2");
    Placement one{std::vector<int>(s->graph.ops().size(), 0)};
    s->executor = std::move(*StrategyExecutor::Create(s->view, s->cluster, one));
    at::set_num_threads(1);
    SetBlasThreads(1);
    KeepFreedHostMemory();
    for (int64_t i = 0; i < kLayers; ++i) {
      auto linear = torch::nn::Linear(
          torch::nn::LinearOptions(kHidden, kHidden).bias(false));
      torch::NoGradGuard no_grad;
      linear->weight.copy_(
          s->executor->Resident("w" + std::to_string(i))->t());
      s->net->push_back(linear);
      s->net->push_back(torch::nn::ReLU());
    }
    s->x = *s->executor->Resident("x");
    // The executor's labels are seeded inside it; the baseline draws its
    // own of the same shape and range (the work is the same).
    s->target = torch::randint(0, kHidden, {kBatch}, torch::kLong);
    s->sgd = std::make_unique<torch::optim::SGD>(
        s->net->parameters(), torch::optim::SGDOptions(0.01).momentum(0.9));
    return s;
  }();
  return *slot;
}

void BM_TorchNn(benchmark::State& state) {
  Setup& s = Get(state.range(0));
  for (auto _ : state) {
    s.sgd->zero_grad();
    torch::Tensor loss =
        torch::nll_loss(torch::log_softmax(s.net->forward(s.x), 1), s.target);
    loss.backward();
    s.sgd->step();
    state.counters["loss"] = loss.item<double>();  // both near ln(width)
  }
}
BENCHMARK(BM_TorchNn)->Arg(1024)->Arg(256)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_Executor(benchmark::State& state) {
  Setup& s = Get(state.range(0));
  for (auto _ : state) {
    absl::StatusOr<StepReport> r = s.executor->Step();
    if (!r.ok()) {
      state.SkipWithError(std::string(r.status().message()).c_str());
      break;
    }
    state.counters["loss"] = r->loss;
  }
  state.counters["nodes"] = static_cast<double>(s.view.nodes().size());
}
BENCHMARK(BM_Executor)->Arg(1024)->Arg(256)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_StrategyOneDevice(benchmark::State& state) {
  Setup& s = Get(state.range(0));
  Strategy one;
  one.stage_of_op.assign(s.view.num_groups(), 0);
  one.stages = {PipelineStage::OneDevicePerReplica({0})};
  one.micro_batches = static_cast<int>(state.range(1));
  absl::StatusOr<std::unique_ptr<StrategyExecutor>> e =
      StrategyExecutor::Create(s.view, s.cluster, one);
  if (!e.ok()) {
    state.SkipWithError(std::string(e.status().message()).c_str());
    return;
  }
  for (auto _ : state) {
    absl::StatusOr<StepReport> r = (*e)->Step();
    if (!r.ok()) {
      state.SkipWithError(std::string(r.status().message()).c_str());
      break;
    }
    state.counters["loss"] = r->loss;
  }
  state.counters["micro_batches"] = static_cast<double>(one.micro_batches);
}
BENCHMARK(BM_StrategyOneDevice)
    ->Args({1024, 1})
    ->Args({1024, 4})
    ->Args({256, 1})
    ->Args({256, 4})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace
}  // namespace placer

BENCHMARK_MAIN();
