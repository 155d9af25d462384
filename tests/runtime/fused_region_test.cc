// The FusedElementwise kernel in the executor: a graph whose elementwise
// regions are fused trains as the graph as written (same losses, same
// parameters, float32 and bf16), and the memory the allocator hands out
// drops as the simulator says it does.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>

#include "graph/elementwise_fusion.h"
#include "graph/onnx_import.h"
#include "graph/training_view.h"
#include "gtest/gtest.h"
#include "profiles/cost_model.h"
#include "runtime/executor.h"
#include "runtime/strategy_executor.h"
#include "simulator/evaluator.h"
#include "tests/runtime/cpu_cluster.h"
#include "tests/runtime/same_training.h"
#include "zoo/zoo.h"

namespace placer {
namespace {

struct Model {
  Graph graph;
  TrainingView view;
};

std::unique_ptr<Model> Load(const onnx::ModelProto* proto,
                            const std::string& file, bool fuse,
                            Precision precision = Precision::kFp32) {
  ImportOptions options;
  options.fuse_attention = true;
  options.fuse_elementwise = fuse;
  absl::StatusOr<Graph> g = file.empty()
                                ? ImportOnnxModel(*proto, "zoo", options)
                                : ImportOnnxFile(file, options);
  EXPECT_TRUE(g.ok()) << g.status();
  if (!g.ok()) return nullptr;
  auto m = std::make_unique<Model>();
  m->graph = std::move(*g);
  TrainingOptions training;
  training.precision = precision;
  m->view = BuildTrainingView(m->graph, training);
  return m;
}

int CountFused(const Graph& g) {
  int n = 0;
  for (const Op& op : g.ops()) n += IsFusedRegion(op);
  return n;
}

// The bytes a region's ops write (its inner tensors and its outputs), the
// largest over the regions.
double LargestInnerBytes(const TrainingView& view) {
  double largest = 0;
  for (const Op& op : view.forward().ops()) {
    const Graph* body = RegionBody(op);
    if (body == nullptr) continue;
    double bytes = 0;
    for (size_t t = op.inputs.size(); t < body->tensors().size(); ++t) {
      bytes += static_cast<double>(body->tensor(static_cast<int>(t)).bytes());
    }
    largest = std::max(largest, bytes);
  }
  return largest;
}

zoo::ZooParams Tiny(const std::string& family) {
  zoo::ZooParams p;
  p.layers = 2;
  p.hidden = 32;
  p.heads = 4;
  if (family == "llama") p.kv_heads = 2;
  p.seq_len = 16;
  p.vocab = 50;
  p.batch_size = 2;
  return p;
}

void ExpectSameTraining(const Model& plain, const Model& fused,
                        double tolerance) {
  ASSERT_GT(CountFused(fused.graph), 0);
  placer::ExpectSameTraining(plain.view, fused.view, tolerance);
}

TEST(FusedRegionTest, TrainsAsTheOpsItReplaces) {
  for (const char* family : {"gpt", "llama"}) {
    SCOPED_TRACE(family);
    absl::StatusOr<onnx::ModelProto> proto =
        zoo::BuildZooModel(family, Tiny(family));
    ASSERT_TRUE(proto.ok()) << proto.status();
    std::unique_ptr<Model> plain = Load(&*proto, "", false);
    std::unique_ptr<Model> fused = Load(&*proto, "", true);
    ASSERT_TRUE(plain && fused);
    ExpectSameTraining(*plain, *fused, 1e-5);
  }
}

// Under bf16 autocast each op of a region computes at the type it has
// alone (RMSNorm's Pow and ReduceMean in fp32, its Muls in bf16), so the
// fused step is the unfused one's, bit for bit up to summation order.
TEST(FusedRegionTest, TrainsAsTheOpsItReplacesInBf16) {
  absl::StatusOr<onnx::ModelProto> proto =
      zoo::BuildZooModel("llama", Tiny("llama"));
  ASSERT_TRUE(proto.ok()) << proto.status();
  std::unique_ptr<Model> plain = Load(&*proto, "", false, Precision::kBf16);
  std::unique_ptr<Model> fused = Load(&*proto, "", true, Precision::kBf16);
  ASSERT_TRUE(plain && fused);
  ExpectSameTraining(*plain, *fused, 1e-3);
}

// PyTorch's exports of Hugging Face's GPT-2 and of a Llama-style decoder.
TEST(FusedRegionTest, TrainsAsTheOpsItReplacesOnPyTorchExports) {
  for (const char* file : {"tests/fixtures/corpus/gpt2.eval.op17.onnx",
                           "tests/fixtures/corpus/llama.eval.op17.onnx"}) {
    SCOPED_TRACE(file);
    std::unique_ptr<Model> plain = Load(nullptr, file, false);
    std::unique_ptr<Model> fused = Load(nullptr, file, true);
    ASSERT_TRUE(plain && fused);
    ExpectSameTraining(*plain, *fused, 1e-5);
  }
}

// Memory: the simulated peak drops with fusion, and the executor's
// accounting (what the training view keeps) is the simulator's, to the
// byte; the allocator's peak is the simulated one but for the inner
// tensors of the region running at the time.
TEST(FusedRegionTest, PeakMemoryDrops) {
  zoo::ZooParams p = Tiny("llama");
  p.seq_len = 128;
  p.hidden = 64;
  absl::StatusOr<onnx::ModelProto> proto = zoo::BuildZooModel("llama", p);
  ASSERT_TRUE(proto.ok()) << proto.status();
  std::unique_ptr<CostModel> costs = NewRooflineCostModel();
  std::unique_ptr<ReadyOrder> order = NewTopologicalReadyOrder();
  const Cluster cpu = Cpus(1);
  double simulated[2] = {0, 0}, allocated[2] = {0, 0}, inner = 0;
  for (bool fuse : {false, true}) {
    std::unique_ptr<Model> m = Load(&*proto, "", fuse);
    ASSERT_TRUE(m);
    Placement one{std::vector<int>(m->graph.ops().size(), 0)};
    SimulationContext c = SimulationContext::Create(m->view, cpu, *costs, *order);
    absl::StatusOr<SimulationResult> sim = Simulate(c, one);
    ASSERT_TRUE(sim.ok()) << sim.status();
    ExecutorOptions o;
    o.measure_allocations = true;
    auto e = StrategyExecutor::Create(m->view, cpu, one, o);
    ASSERT_TRUE(e.ok()) << e.status();
    absl::StatusOr<StepReport> r = (*e)->Step();
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->peak_memory_bytes[0], sim->peak_memory_bytes[0]);
    simulated[fuse] = static_cast<double>(sim->peak_memory_bytes[0]);
    allocated[fuse] = static_cast<double>(r->allocated_peak_bytes[0]);
    std::printf("%s llama: simulated %.0f, allocated %.0f\n",
                fuse ? "fused" : "as exported", simulated[fuse],
                allocated[fuse]);
    if (fuse) inner = LargestInnerBytes(m->view);
  }
  std::printf("largest region's written tensors: %.0f\n", inner);
  EXPECT_LT(simulated[1], 0.8 * simulated[0]);
  // The executor runs a region op by op: while one runs, the tensors its
  // ops write (recomputing: again, with their gradients) exist beside what
  // the simulator counts; never more than twice the largest region's.
  EXPECT_LE(allocated[1], simulated[1] + 2 * inner);
  EXPECT_NEAR(allocated[0], simulated[0], 0.01 * simulated[0]);
}

}  // namespace
}  // namespace placer
