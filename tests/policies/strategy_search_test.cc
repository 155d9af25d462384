// The strategy search: what each parallelism mode may return, memory
// limits, determinism, and the headline on a zoo model (ResNet-50
// on four P100s runs at least 3x one device per sample as data parallel).
// Recomputation, ZeRO and tensor parallelism where memory decides:
// strategy_search_memory_test.cc.
#include "policies/strategy_search.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "graph/onnx_import.h"
#include "graph/training_view.h"
#include "gtest/gtest.h"
#include "policies/policy.h"
#include "profiles/cluster.h"
#include "profiles/cost_model.h"
#include "simulator/simulator.h"
#include "simulator/strategy.h"
#include "simulator/strategy_simulator.h"
#include "tests/graph/test_models.h"
#include "tests/policies/strategy_scenario.h"
#include "zoo/zoo.h"

namespace placer {
namespace {

// `policy`'s placement of `s`'s model (`name`) simulated as an op
// placement and as its strategy: the same step (to 1e-12) and peaks.
// Prints both steps.
void ExpectPlacementAsItsStrategyAlike(Scenario& s, const std::string& name,
                                       const std::string& policy) {
  SCOPED_TRACE(name + " " + policy);
  absl::StatusOr<std::unique_ptr<PlacementPolicy>> p = NewPolicy(policy);
  ASSERT_TRUE(p.ok()) << p.status();
  absl::StatusOr<Placement> placement = (*p)->Place(s.input, {});
  ASSERT_TRUE(placement.ok()) << placement.status();
  absl::StatusOr<SimulationResult> op = Simulate(s.context, *placement);
  ASSERT_TRUE(op.ok()) << op.status();
  absl::StatusOr<StrategySimulation> wide =
      SimulateStrategy(s.context, StrategyOfPlacement(*placement));
  ASSERT_TRUE(wide.ok()) << wide.status();
  std::printf("%s %s: op placement %.12f s, as its strategy %.12f s\n",
              name.c_str(), policy.c_str(), op->step_seconds,
              wide->step.step_seconds);
  EXPECT_NEAR(wide->step.step_seconds, op->step_seconds,
              1e-12 * op->step_seconds);
  EXPECT_EQ(wide->step.peak_memory_bytes, op->peak_memory_bytes);
}

// Hybrid candidates are replicas of op placements; their wide stages are
// lowered as the op placement's own lowering lowers the stage's nodes on
// the replica's devices (wide_passes.h: ready nodes by priority and node
// key, copies between slots on links, booked in its order, a slot's
// buffer of a weight's gradient to its update's slot among them, partial
// additions charged as PartialAdditions does, updates once the backward
// has ended; StrategySimulatorTest.
// AnOpPlacementAsAStrategyUpdatesAfterItsBackward, WideUpdateTest). On
// heft's and m_etf's placements of GNMT-4 and Inception-v3 on four P100s
// the placement as its strategy takes the op placement's step to 1e-12
// (0.996-1.000x while the wide pass broke ties by position in the pass and
// booked copies by their first reader; 1.000-1.031x while the op
// placement's updates ran as soon as their gradients were final,
// 1.037-1.107x while the reading slot made the copies, 1.049-1.540x while
// each slot ran its nodes in the view's order). Prints each step.
TEST(StrategySearchTest, AnOpPlacementAsItsStrategyIsSimulatedAlike) {
  for (const char* model : {"gnmt4", "inception_v3"}) {
    absl::StatusOr<onnx::ModelProto> m = zoo::BuildZooModel(model, {});
    ASSERT_TRUE(m.ok()) << m.status();
    absl::StatusOr<Graph> graph = ImportOnnxModel(*m, model, {});
    ASSERT_TRUE(graph.ok()) << graph.status();
    Scenario s(*std::move(graph), "p100x4");
    for (const char* policy : {"heft", "m_etf"}) {
      ExpectPlacementAsItsStrategyAlike(s, model, policy);
    }
  }
}

// The same on PyTorch's own training-mode exports (tests/fixtures/corpus),
// heft's, m_etf's, m_sct's and critical_path's placements on four P100s:
// 52 steps equal to 1e-12, and their peaks. (critical_path's placements of
// the fused LSTM and GRU were 1.032x and 1.022x while the op placement's
// engine started each update once its own gradient had arrived; now, as
// the strategy and the executor, a device's updates start once every
// buffer they read has: WideUpdateTest.ADevicesUpdatesWaitForEveryBuffer...)
TEST(StrategySearchTest, AnOpPlacementAsItsStrategyIsSimulatedAlikeOnExports) {
  for (const char* file :
       {"bert_tiny.train.op13", "bert_masked.train.op17", "gpt2.train.op17",
        "llama.train.op17", "llama_moe.train.op17", "gru.train.op17",
        "lstm.train.op13", "convnext_tiny.train.op13", "densenet121.train.op17",
        "inception_v3.train.op17", "efficientnet_b0.train.op17",
        "googlenet.train.op17", "alexnet.train.op17"}) {
    absl::StatusOr<Graph> graph = ImportOnnxFile(
        std::string("tests/fixtures/corpus/") + file + ".onnx", {});
    ASSERT_TRUE(graph.ok()) << graph.status();
    Scenario s(*std::move(graph), "p100x4");
    for (const char* policy : {"heft", "m_etf", "m_sct", "critical_path"}) {
      ExpectPlacementAsItsStrategyAlike(s, file, policy);
    }
  }
}

TEST(StrategySearchTest, EachModeReturnsItsKindOfStrategy) {
  Scenario s(Chain(256, 1024), "p100x4");
  absl::StatusOr<StrategyChoice> data = s.Search(Parallelism::kData, 4);
  ASSERT_TRUE(data.ok()) << data.status();
  ASSERT_EQ(data->strategy.stages.size(), 1u);
  EXPECT_EQ(data->strategy.stages[0].FirstDevices(),
            (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(data->strategy.stages[0].width(), 1);
  EXPECT_EQ(data->strategy.micro_batches, 4);

  absl::StatusOr<StrategyChoice> pipe = s.Search(Parallelism::kPipeline, 8);
  ASSERT_TRUE(pipe.ok()) << pipe.status();
  EXPECT_GE(pipe->strategy.stages.size(), 2u);
  for (const PipelineStage& stage : pipe->strategy.stages) {
    EXPECT_EQ(stage.num_replicas(), 1);
  }
  EXPECT_EQ(pipe->strategy.micro_batches, 8);

  // auto sees both shapes (and more): never worse per batch than either
  // at the same micro-batch count.
  for (int m : {4, 8}) {
    absl::StatusOr<StrategyChoice> a = s.Search(Parallelism::kAuto, m);
    absl::StatusOr<StrategyChoice> d = s.Search(Parallelism::kData, m);
    absl::StatusOr<StrategyChoice> p = s.Search(Parallelism::kPipeline, m);
    ASSERT_TRUE(a.ok() && d.ok() && p.ok());
    EXPECT_LE(a->simulation.seconds_per_batch, d->simulation.seconds_per_batch);
    EXPECT_LE(a->simulation.seconds_per_batch, p->simulation.seconds_per_batch);
  }
  EXPECT_EQ(s.Search(Parallelism::kModel, 4).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.Search(Parallelism::kData, 2).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(StrategySearchTest, SameInputsSameStrategy) {
  Scenario s(Chain(256, 1024), "v100x8");
  absl::StatusOr<StrategyChoice> a = s.Search(Parallelism::kAuto, 8);
  absl::StatusOr<StrategyChoice> b = s.Search(Parallelism::kAuto, 8);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(DescribeStrategy(a->strategy), DescribeStrategy(b->strategy));
  EXPECT_EQ(a->strategy.stage_of_op, b->strategy.stage_of_op);
  EXPECT_EQ(a->simulation.step.step_seconds, b->simulation.step.step_seconds);
  // With op placement inside replicas (the policy bounded by evaluations,
  // not time): the same hybrid twice, and auto no slower than it.
  PolicyOptions options;
  options.budget_seconds = 60;
  options.max_evaluations = 100;
  absl::StatusOr<StrategyChoice> h =
      s.Search(Parallelism::kHybrid, 8, options, "best");
  absl::StatusOr<StrategyChoice> h2 =
      s.Search(Parallelism::kHybrid, 8, options, "best");
  absl::StatusOr<StrategyChoice> wide =
      s.Search(Parallelism::kAuto, 8, options, "best");
  ASSERT_TRUE(h.ok() && h2.ok() && wide.ok()) << h.status();
  EXPECT_GE((h->strategy.stages[0]).width(), 2);
  EXPECT_EQ(DescribeStrategy(h->strategy), DescribeStrategy(h2->strategy));
  EXPECT_EQ(h->strategy.slot_of_op, h2->strategy.slot_of_op);
  EXPECT_EQ(h->simulation.step.step_seconds, h2->simulation.step.step_seconds);
  EXPECT_LE(wide->simulation.seconds_per_batch,
            h->simulation.seconds_per_batch);
  EXPECT_LE(wide->simulation.seconds_per_batch,
            a->simulation.seconds_per_batch);
}

// `place --parallelism auto` searches hybrid, then auto: auto takes the
// op placements hybrid made inside replicas (the same answer as placing
// them again, when the policy is bounded by evaluations), and a kept
// placement is what a search uses.
TEST(StrategySearchTest, InsidePlacementsAreTakenFromAnEarlierSearch) {
  Scenario s(Chain(256, 1024), "v100x8");
  PolicyOptions options;
  options.budget_seconds = 60;
  options.max_evaluations = 100;
  InsidePlacements kept;
  ASSERT_TRUE(s.Search(Parallelism::kHybrid, 8, options, "best", &kept).ok());
  for (int w = 2; w <= 4; ++w) {
    EXPECT_NE(kept.Find("best", w), nullptr) << w;
  }
  EXPECT_EQ(kept.Find("heft", 2), nullptr);
  absl::StatusOr<StrategyChoice> again =
      s.Search(Parallelism::kAuto, 8, options, "best");
  absl::StatusOr<StrategyChoice> taken =
      s.Search(Parallelism::kAuto, 8, options, "best", &kept);
  ASSERT_TRUE(again.ok() && taken.ok());
  EXPECT_EQ(DescribeStrategy(taken->strategy),
            DescribeStrategy(again->strategy));
  EXPECT_EQ(taken->strategy.slot_of_op, again->strategy.slot_of_op);
  EXPECT_EQ(taken->simulation.step.step_seconds,
            again->simulation.step.step_seconds);
  // Every other op on the second of two devices; wider placements on one
  // device only (data parallelism's): the hybrid is that placement's.
  InsidePlacements planted;
  const int ops = static_cast<int>(s.graph.ops().size());
  std::vector<int> alternate(ops), first(ops, 0);
  for (int i = 0; i < ops; ++i) alternate[i] = i % 2;
  planted.Keep("best", 2, alternate);
  planted.Keep("best", 3, first);
  planted.Keep("best", 4, first);
  absl::StatusOr<StrategyChoice> h =
      s.Search(Parallelism::kHybrid, 8, options, "best", &planted);
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->strategy.slot_of_op, alternate);
  EXPECT_EQ(h->strategy.stages[0].num_replicas(), 4);
}

TEST(StrategySearchTest, MemoryLimitsPushWeightsApart) {
  // Eight 16 MiB weights (2048^2 floats) with momentum: 256 MiB resident
  // when one device holds them all, so data parallelism needs that on
  // every device; a pipeline splits them.
  Scenario s(Chain(8, 2048), "p100x4");
  PolicyOptions options;
  options.memory_limit_bytes.assign(4, int64_t{200} << 20);
  absl::StatusOr<StrategyChoice> a = s.Search(Parallelism::kAuto, 4, options);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_GE(a->strategy.stages.size(), 2u) << DescribeStrategy(a->strategy);
  for (int64_t peak : a->simulation.step.peak_memory_bytes) {
    EXPECT_LE(peak, int64_t{200} << 20);
  }
  // Up to ZeRO-1 data parallelism holds every weight, and every gradient
  // until the update.
  absl::StatusOr<StrategyChoice> d =
      s.Search(Parallelism::kData, 4, options, "", nullptr,
               StageRecompute::kAuto, ZeroStage::kOptimizerState);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(d.status().message().find("no strategy fits in memory"),
            std::string::npos)
      << d.status();
  EXPECT_NE(d.status().message().find("/gpu:"), std::string::npos);
  // It names what does not fit: the closest, ZeRO-1 over the 4 replicas,
  // holds the 128 MiB of weights and a quarter of their momentum.
  EXPECT_NE(d.status().message().find("parameters and optimizer state 0.2 GB"),
            std::string::npos)
      << d.status();
  EXPECT_NE(d.status().message().find("the rest of a micro-batch's peak"),
            std::string::npos);
  // And when: during a pass of its one stage (DescribePeakPass).
  EXPECT_NE(d.status().message().find("at stage 0's "), std::string::npos)
      << d.status();
  // ZeRO-2 and -3 reduce-scatter each gradient once the backward has made
  // it, each device keeping its quarter: data parallelism fits.
  absl::StatusOr<StrategyChoice> sharded =
      s.Search(Parallelism::kData, 4, options);
  ASSERT_TRUE(sharded.ok()) << sharded.status();
  EXPECT_TRUE(ShardsGradients(sharded->strategy.zero))
      << DescribeStrategy(sharded->strategy);
  for (int64_t peak : sharded->simulation.step.peak_memory_bytes) {
    EXPECT_LE(peak, int64_t{200} << 20);
  }
}

TEST(StrategySearchTest, WhereNothingElseFitsReplicasOfAnOpPlacementDo) {
  // Eight 16 MiB weights with momentum (256 MiB) and a bias read at both
  // ends (the only cuts isolate the first or last MatMul) on four P100s
  // limited to 240 MiB: one device and data parallelism cannot hold the
  // weights, nor can a pipeline's stage of seven; two replicas of an op
  // placement over two devices (each holding about half the weights, plus
  // a gradient buffer for its two micro-batches) fit, as do tensor-parallel
  // groups (each device a share of every weight).
  Scenario s(Chain(64, 2048, /*biased=*/true), "p100x4");
  PolicyOptions options;
  options.budget_seconds = 5;
  options.max_evaluations = 200;
  options.memory_limit_bytes.assign(4, int64_t{240} << 20);
  // Up to ZeRO-1 data parallelism holds every weight and gradient; ZeRO-2
  // and -3 shard the gradients as they are made, and fit
  // (strategy_search_memory_test.cc has ZeRO's cases).
  EXPECT_EQ(s.Search(Parallelism::kData, 4, options, "", nullptr,
                     StageRecompute::kAuto, ZeroStage::kOptimizerState)
                .status()
                .code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_FALSE(s.Search(Parallelism::kPipeline, 4, options).ok());
  absl::StatusOr<StrategyChoice> h =
      s.Search(Parallelism::kHybrid, 4, options, "best");
  ASSERT_TRUE(h.ok()) << h.status();
  ASSERT_EQ(h->strategy.stages.size(), 1u);
  EXPECT_EQ(h->strategy.stages[0].num_replicas(), 2);
  EXPECT_EQ((h->strategy.stages[0]).width(), 2)
      << DescribeStrategy(h->strategy);
  // Both slots run ops: the model is split, not copied.
  std::vector<int> ops_on(2, 0);
  for (int slot : h->strategy.slot_of_op) ++ops_on[slot];
  EXPECT_GT(ops_on[0], 0);
  EXPECT_GT(ops_on[1], 0);
  // auto without tensor parallelism sees the hybrid, and pipelines whose
  // stages span two devices.
  absl::StatusOr<StrategyChoice> a =
      s.Search(Parallelism::kAuto, 4, options, "best", nullptr,
               StageRecompute::kAuto, std::nullopt, /*tensor=*/1);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_LE(a->simulation.seconds_per_batch, h->simulation.seconds_per_batch);
  int widest = 1;
  for (const PipelineStage& stage : a->strategy.stages) {
    widest = std::max(widest, stage.width());
  }
  EXPECT_EQ(widest, 2) << DescribeStrategy(a->strategy);
  for (const StrategyChoice* c : {&*h, &*a}) {
    for (int64_t peak : c->simulation.step.peak_memory_bytes) {
      EXPECT_LE(peak, int64_t{240} << 20) << DescribeStrategy(c->strategy);
    }
  }
  // Without a policy for the inside, auto without tensor parallelism or
  // ZeRO finds nothing that fits, and hybrid is refused.
  EXPECT_FALSE(s.Search(Parallelism::kAuto, 4, options, "", nullptr,
                        StageRecompute::kAuto, ZeroStage::kNone, 1)
                   .ok());
  EXPECT_EQ(s.Search(Parallelism::kHybrid, 4, options).status().code(),
            absl::StatusCode::kInvalidArgument);
  // With it, auto splits the MatMuls over tensor-parallel groups instead,
  // faster than the hybrid.
  absl::StatusOr<StrategyChoice> t = s.Search(Parallelism::kAuto, 4, options);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_GE(t->strategy.stages[0].tensor(), 2) << DescribeStrategy(t->strategy);
  EXPECT_LT(t->simulation.seconds_per_batch, a->simulation.seconds_per_batch);
}

// A cluster of more identical devices than the search's pool (64 GPUs in
// 8 hosts, the pool 32): a chain whose Adam state fits only when its
// weights are split over all 64 (105 MiB each; the best over 32 needs
// more) is placed by the uniform candidates, tensor groups inside a host,
// stages of equal work and their replicas on every device, each within
// its limit.
TEST(StrategySearchTest, UniformCandidatesUseEveryDeviceBeyondThePool) {
  Scenario s(Chain(8, 4096), "dgx_h100:nodes=8", Optimizer::kAdam);
  PolicyOptions options;
  const int64_t limit = int64_t{105} << 20;
  options.memory_limit_bytes.assign(64, limit);
  options.budget_seconds = 600;
  absl::StatusOr<StrategyChoice> tensor = s.Search(
      Parallelism::kTensor, 8, options, "", nullptr, StageRecompute::kNone);
  ASSERT_TRUE(tensor.ok()) << tensor.status();
  const Strategy& t = tensor->strategy;
  int devices = 0;
  for (const PipelineStage& stage : t.stages) {
    devices += stage.num_replicas() * stage.tensor();
    EXPECT_GE(stage.tensor(), 2) << DescribeStrategy(t);
  }
  EXPECT_EQ(devices, 64) << DescribeStrategy(t);
  for (int64_t peak : tensor->simulation.step.peak_memory_bytes) {
    EXPECT_LE(peak, limit);
  }
}

// The uniform candidates over all 64 devices go first; the pool's over 32
// are then bounded by a micro-batch's work over their devices, which none
// beats: a fixed pool shape simulated on its own is no faster than the
// answer.
TEST(StrategySearchTest, CandidatesOnFewerDevicesAreBoundedByTheBest) {
  Scenario s(Chain(8, 4096), "dgx_h100:nodes=8", Optimizer::kAdam);
  PolicyOptions options;
  options.budget_seconds = 600;
  absl::StatusOr<StrategyChoice> all = s.Search(
      Parallelism::kTensor, 64, options, "", nullptr, StageRecompute::kNone);
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_GT(all->bounded, 0);
  StrategySearchOptions search;
  search.parallelism = Parallelism::kTensor;
  search.recompute = StageRecompute::kNone;
  search.micro_batches = 64;
  search.tensor = 2;
  search.stages = 1;
  search.replicas = 16;  // 32 devices: the pool's
  absl::StatusOr<StrategyChoice> pool = SearchStrategy(s.input, options, search);
  ASSERT_TRUE(pool.ok()) << pool.status();
  EXPECT_GE(pool->simulation.seconds_per_batch,
            all->simulation.seconds_per_batch)
      << DescribeStrategy(pool->strategy) << " against "
      << DescribeStrategy(all->strategy);
}

// Under a limit below what any memory saver could free (1 MiB against
// 16 MiB weights), each candidate is simulated once: no ZeRO or
// recomputation retry, and its tree allreduce variant not at all.
TEST(StrategySearchTest, RetriesThatCannotFitAreNotSimulated) {
  Scenario s(Chain(8, 2048), "p100x4", Optimizer::kAdam);
  PolicyOptions options;
  options.memory_limit_bytes.assign(4, int64_t{1} << 20);
  int64_t evaluations = -1;
  options.on_progress = [&](const SearchProgress& p) {
    evaluations = p.evaluations;
  };
  absl::StatusOr<StrategyChoice> data = s.Search(Parallelism::kData, 4, options);
  EXPECT_EQ(data.status().code(), absl::StatusCode::kResourceExhausted)
      << data.status();
  // Data parallelism's one shape (a stage of 4 replicas), ring first.
  EXPECT_EQ(evaluations, 1);
}

// Eight 16 MiB weights trained with Adam hold 384 MiB with their state:
// 96 MiB a device over the four, whatever the op placement inside
// replicas. Under 64 MiB hybrid places nothing and says why.
TEST(StrategySearchTest, HybridSaysWhenTheWeightsCannotFitThePool) {
  Scenario s(Chain(8, 2048), "p100x4", Optimizer::kAdam);
  PolicyOptions options;
  options.memory_limit_bytes.assign(4, int64_t{64} << 20);
  absl::StatusOr<StrategyChoice> hybrid =
      s.Search(Parallelism::kHybrid, 4, options, "heft");
  EXPECT_EQ(hybrid.status().code(), absl::StatusCode::kResourceExhausted)
      << hybrid.status();
  EXPECT_NE(hybrid.status().message().find(
                "no hybrid strategy fits in memory: the parameters and their "
                "optimizer state, 0.4 GB"),
            std::string::npos)
      << hybrid.status();
}

// A fixed layout (a published run's tensor x pipeline x data sizes): only
// candidates of that shape are simulated, within the pool (8 devices) and
// beyond it (64, the uniform candidates); a shape no candidate has is an
// error naming it.
TEST(StrategySearchTest, AFixedShapeIsTheOnlyOneSimulated) {
  for (const char* name : {"h100x8", "dgx_h100:nodes=8"}) {
    SCOPED_TRACE(name);
    Scenario s(Chain(8, 1024), name, Optimizer::kAdam);
    const int devices = s.cluster.num_devices();
    StrategySearchOptions search;
    search.parallelism = Parallelism::kTensor;
    search.tensor = 2;
    search.stages = 2;
    search.replicas = devices / 4;
    search.micro_batches = 2 * devices;
    PolicyOptions options;
    options.budget_seconds = 600;
    absl::StatusOr<StrategyChoice> fixed =
        SearchStrategy(s.input, options, search);
    ASSERT_TRUE(fixed.ok()) << fixed.status();
    const Strategy& t = fixed->strategy;
    ASSERT_EQ(t.stages.size(), 2u) << DescribeStrategy(t);
    for (const PipelineStage& stage : t.stages) {
      EXPECT_EQ(stage.num_replicas(), devices / 4) << DescribeStrategy(t);
      EXPECT_EQ(stage.tensor(), 2) << DescribeStrategy(t);
    }
    search.stages = 3;
    absl::StatusOr<StrategyChoice> none =
        SearchStrategy(s.input, options, search);
    EXPECT_EQ(none.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(none.status().message().find("3 stages of"), std::string::npos)
        << none.status();
  }
}

// Data parallelism over two hosts of two devices, fast inside a host and
// slow between: the search also simulates hierarchical allreduce and keeps
// it, the gradients crossing the slow link once.
TEST(StrategySearchTest, DataParallelismAcrossHostsAllreducesHierarchically) {
  std::string text = "name: \"two_hosts\"\n";
  for (int i = 0; i < 2; ++i) {
    text += "devices { name: \"/gpu:" + std::to_string(i) +
            "\" kind: GPU peak_flops: 1e13 memory_bandwidth: 1e12 "
            "memory_bytes: 16000000000 }\n";
  }
  text += "default_link { latency_seconds: 1e-6 bandwidth: 1e11 }\n"
          "nodes: 2 between_nodes { latency_seconds: 1e-5 bandwidth: 1e9 }\n";
  const std::string path =
      std::string(std::getenv("TEST_TMPDIR")) + "/two_hosts.pbtxt";
  std::ofstream(path) << text;
  Scenario s(Chain(256, 1024), path);
  absl::StatusOr<StrategyChoice> data = s.Search(Parallelism::kData, 4);
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_EQ(data->strategy.allreduce, AllreduceAlgorithm::kHierarchical)
      << DescribeStrategy(data->strategy);
  Strategy ring = data->strategy;
  ring.allreduce = AllreduceAlgorithm::kRing;
  absl::StatusOr<StrategySimulation> flat = SimulateStrategy(s.context, ring);
  ASSERT_TRUE(flat.ok()) << flat.status();
  EXPECT_LT(data->simulation.step.step_seconds, flat->step.step_seconds);
}

TEST(StrategySearchTest, ResNet50OnFourP100sIsThreeTimesOneDevice) {
  zoo::ZooParams params;
  params.weights = false;
  absl::StatusOr<onnx::ModelProto> model =
      zoo::BuildZooModel("resnet50", params);
  ASSERT_TRUE(model.ok()) << model.status();
  absl::StatusOr<Graph> graph = ImportOnnxModel(*model, "resnet50", {});
  ASSERT_TRUE(graph.ok()) << graph.status();
  Scenario s(*std::move(graph), "p100x4");
  absl::StatusOr<StrategySimulation> one = SimulateStrategy(
      s.context, OneDeviceStrategy(s.view, 0, 4));
  ASSERT_TRUE(one.ok()) << one.status();
  absl::StatusOr<StrategyChoice> a = s.Search(Parallelism::kAuto, 4);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_GE(one->step.step_seconds / a->simulation.step.step_seconds, 3.0)
      << DescribeStrategy(a->strategy);
}

}  // namespace
}  // namespace placer
