// The strategy search where memory decides: recomputation (per stage, by
// layer, and why nothing was found), ZeRO's stages and tensor parallelism
// fit what data parallelism and pipelines cannot, and the faster of what
// fits is kept. The rest of the search: strategy_search_test.cc.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>

#include "gtest/gtest.h"
#include "policies/strategy_search.h"
#include "simulator/strategy.h"
#include "tests/policies/strategy_scenario.h"
#include "zoo/zoo.h"

namespace placer {
namespace {

// Eight MatMuls of [16384, 256] activations (16 MiB each) and small
// weights on four P100s limited to 150 MiB: under 1F1B the first stage
// keeps every activation of each micro-batch in flight, and no pipeline
// fits (the closest needs 162 MiB). With recomputation the over stages
// keep their inputs only: auto recomputes the first stage alone and fits,
// faster than recomputing every stage (full).
TEST(StrategySearchTest, RecomputationFitsAPipelineWhoseActivationsDoNot) {
  Scenario s(Chain(16384, 256), "p100x4");
  PolicyOptions options;
  const int64_t limit = int64_t{150} << 20;
  options.memory_limit_bytes.assign(4, limit);
  auto search = [&](StageRecompute recompute) {
    return s.Search(Parallelism::kPipeline, 8, options, "", nullptr, recompute);
  };
  EXPECT_EQ(search(StageRecompute::kNone).status().code(),
            absl::StatusCode::kResourceExhausted);
  absl::StatusOr<StrategyChoice> a = search(StageRecompute::kAuto);
  absl::StatusOr<StrategyChoice> full = search(StageRecompute::kFull);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(full.ok()) << full.status();
  int recomputing = 0;
  for (const PipelineStage& stage : a->strategy.stages) {
    recomputing += stage.recompute == Recompute::kFull;
  }
  EXPECT_GE(recomputing, 1) << DescribeStrategy(a->strategy);
  EXPECT_LT(recomputing, static_cast<int>(a->strategy.stages.size()))
      << DescribeStrategy(a->strategy);
  for (const PipelineStage& stage : full->strategy.stages) {
    EXPECT_EQ(stage.recompute, Recompute::kFull);
  }
  EXPECT_LT(a->simulation.seconds_per_batch,
            full->simulation.seconds_per_batch);
  for (const StrategyChoice* c : {&*a, &*full}) {
    for (int64_t peak : c->simulation.step.peak_memory_bytes) {
      EXPECT_LE(peak, limit) << DescribeStrategy(c->strategy);
    }
  }
}

// Recomputation by layer on the chain: its eight MatMuls are eight
// repeated layers of one op, each keeping its output (the next one's
// input), so layer by layer reruns nothing and keeps what no recomputation
// keeps. On a graph with no repeated layers, a search whose every
// candidate the simulator refuses says why.
TEST(StrategySearchTest, RecomputationByLayerAndWhyNothingWasFound) {
  Scenario s(Chain(64, 32), "p100x4");
  absl::StatusOr<StrategyChoice> layers = s.Search(
      Parallelism::kData, 4, {}, "", nullptr, StageRecompute::kLayers);
  absl::StatusOr<StrategyChoice> none = s.Search(
      Parallelism::kData, 4, {}, "", nullptr, StageRecompute::kNone);
  ASSERT_TRUE(layers.ok()) << layers.status();
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_EQ(layers->strategy.stages[0].recompute, Recompute::kLayers);
  EXPECT_DOUBLE_EQ(layers->simulation.step.step_seconds,
                   none->simulation.step.step_seconds);
  EXPECT_EQ(layers->simulation.step.peak_memory_bytes,
            none->simulation.step.peak_memory_bytes);

  zoo::ZooParams params;
  params.batch_size = 2;
  params.hidden = 3;
  absl::StatusOr<onnx::ModelProto> model =
      zoo::BuildZooModel("diamond", params);
  ASSERT_TRUE(model.ok()) << model.status();
  absl::StatusOr<Graph> graph = ImportOnnxModel(*model, "diamond", {});
  ASSERT_TRUE(graph.ok()) << graph.status();
  Scenario diamond(*std::move(graph), "p100x4");
  absl::StatusOr<StrategyChoice> refused = diamond.Search(
      Parallelism::kData, 4, {}, "", nullptr, StageRecompute::kLayers);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find(
                "the first refused: recomputation by layer"),
            std::string::npos)
      << refused.status();
}

// One stage of data parallelism gains nothing from recomputing its
// forward whole (its backward rebuilds at once what it would have kept)
// and little from selective recomputation of a decoder, whose products
// it keeps; layer by layer holds one layer's activations at a time. With
// the limit at that peak, auto tries it between the two and fits.
TEST(StrategySearchTest, AutoRecomputesLayerByLayerWhereNothingElseFits) {
  zoo::ZooParams params;
  params.layers = 4;
  params.hidden = 64;
  params.heads = 4;
  params.kv_heads = 2;
  params.ffn = 128;
  params.seq_len = 64;
  params.vocab = 100;
  params.batch_size = 2;
  absl::StatusOr<onnx::ModelProto> model =
      zoo::BuildZooModel("llama", params);
  ASSERT_TRUE(model.ok()) << model.status();
  absl::StatusOr<Graph> graph = ImportOnnxModel(*model, "llama", {});
  ASSERT_TRUE(graph.ok()) << graph.status();
  Scenario s(*std::move(graph), "p100x4");
  auto search = [&](StageRecompute recompute, PolicyOptions options = {}) {
    return s.Search(Parallelism::kData, 4, options, "", nullptr, recompute,
                    ZeroStage::kNone);
  };
  auto peak = [](const StrategyChoice& c) {
    return *std::max_element(c.simulation.step.peak_memory_bytes.begin(),
                             c.simulation.step.peak_memory_bytes.end());
  };
  absl::StatusOr<StrategyChoice> layers = search(StageRecompute::kLayers);
  absl::StatusOr<StrategyChoice> selective =
      search(StageRecompute::kSelective);
  absl::StatusOr<StrategyChoice> full = search(StageRecompute::kFull);
  ASSERT_TRUE(layers.ok() && selective.ok() && full.ok());
  const int64_t limit = peak(*layers);
  ASSERT_GT(peak(*selective), limit);
  ASSERT_GT(peak(*full), limit);

  PolicyOptions options;
  options.memory_limit_bytes.assign(4, limit);
  EXPECT_EQ(search(StageRecompute::kNone, options).status().code(),
            absl::StatusCode::kResourceExhausted);
  absl::StatusOr<StrategyChoice> chosen =
      search(StageRecompute::kAuto, options);
  ASSERT_TRUE(chosen.ok()) << chosen.status();
  EXPECT_EQ(chosen->strategy.stages[0].recompute, Recompute::kLayers);
  EXPECT_EQ(peak(*chosen), limit);
  EXPECT_DOUBLE_EQ(chosen->simulation.step.step_seconds,
                   layers->simulation.step.step_seconds);
}

// Eight 16 MiB weights (P = 128 MiB) trained with AdamW (256 MiB of state)
// on four P100s limited to 400 MiB: data parallelism holds P, the state and
// a micro-batch's gradients (P) on every device, over the limit; with
// ZeRO-1 each replica holds a quarter of the state (64 MiB) and fits.
// auto (zero unset) finds that; --zero 0 does not.
TEST(StrategySearchTest, ZeroFitsDataParallelismWhoseOptimizerStateDoesNot) {
  Scenario s(Chain(8, 2048), "p100x4", Optimizer::kAdam);
  PolicyOptions options;
  const int64_t limit = int64_t{400} << 20;
  options.memory_limit_bytes.assign(4, limit);
  absl::StatusOr<StrategyChoice> none =
      s.Search(Parallelism::kData, 4, options, "", nullptr,
               StageRecompute::kNone, ZeroStage::kNone);
  EXPECT_EQ(none.status().code(), absl::StatusCode::kResourceExhausted)
      << none.status();
  absl::StatusOr<StrategyChoice> a = s.Search(
      Parallelism::kData, 4, options, "", nullptr, StageRecompute::kNone);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->strategy.zero, ZeroStage::kOptimizerState)
      << DescribeStrategy(a->strategy);
  for (int64_t peak : a->simulation.step.peak_memory_bytes) {
    EXPECT_LE(peak, limit);
    EXPECT_GT(peak, int64_t{320} << 20);  // P + state / 4 + P at least
  }
}

// Where ZeRO-1 makes a candidate fit, ZeRO-2 is simulated too and kept
// when faster. Eight 16 MiB weights with Adam on two CPUs (slow links),
// each device limited to halfway between the peaks without ZeRO and with
// ZeRO-1. At one micro-batch per replica the two tie (ZeRO-2's
// reduce-scatter and gather move what ZeRO-1's allreduce does; its gather
// too) and ZeRO-1 stays; at four per replica ZeRO-2's reduce-scatters
// overlap the backward that ZeRO-1's allreduce follows: 0.0354 against
// 0.0430 s per micro-batch, and auto's plan is ZeRO-2's.
TEST(StrategySearchTest, WhereZeroOneFitsAFasterZeroTwoIsKept) {
  Scenario s(Chain(8, 2048), "cpu2", Optimizer::kAdam);
  for (int micro_batches : {2, 8}) {
    SCOPED_TRACE(micro_batches);
    auto fixed = [&](ZeroStage zero, const PolicyOptions& options) {
      return s.Search(Parallelism::kData, micro_batches, options, "", nullptr,
                      StageRecompute::kNone, zero);
    };
    absl::StatusOr<StrategyChoice> none = fixed(ZeroStage::kNone, {});
    absl::StatusOr<StrategyChoice> sharded =
        fixed(ZeroStage::kOptimizerState, {});
    ASSERT_TRUE(none.ok()) << none.status();
    ASSERT_TRUE(sharded.ok()) << sharded.status();
    PolicyOptions options;
    options.memory_limit_bytes.assign(
        2, (none->simulation.step.peak_memory_bytes[0] +
            sharded->simulation.step.peak_memory_bytes[0]) / 2);
    EXPECT_EQ(fixed(ZeroStage::kNone, options).status().code(),
              absl::StatusCode::kResourceExhausted);
    absl::StatusOr<StrategyChoice> one =
        fixed(ZeroStage::kOptimizerState, options);
    absl::StatusOr<StrategyChoice> two = fixed(ZeroStage::kGradients, options);
    absl::StatusOr<StrategyChoice> a =
        s.Search(Parallelism::kData, micro_batches, options, "", nullptr,
                 StageRecompute::kNone);
    ASSERT_TRUE(one.ok()) << one.status();
    ASSERT_TRUE(two.ok()) << two.status();
    ASSERT_TRUE(a.ok()) << a.status();
    const double one_s = one->simulation.seconds_per_batch;
    const double two_s = two->simulation.seconds_per_batch;
    if (micro_batches == 2) {
      EXPECT_DOUBLE_EQ(one_s, two_s);
      EXPECT_EQ(a->strategy.zero, ZeroStage::kOptimizerState);
    } else {
      EXPECT_LT(two_s, 0.9 * one_s);
      EXPECT_EQ(a->strategy.zero, ZeroStage::kGradients);
    }
    EXPECT_DOUBLE_EQ(a->simulation.seconds_per_batch, std::min(one_s, two_s));
  }
}

// ZeRO-3 on the scenario above (256 MiB of weights and momentum, 240 MiB
// per device): data parallelism fits once each device holds a quarter of
// the weights, gathering each before its MatMul.
TEST(StrategySearchTest, ZeroThreeFitsWhatOnlyShardedWeightsFit) {
  Scenario s(Chain(64, 2048, /*biased=*/true), "p100x4");
  PolicyOptions options;
  const int64_t limit = int64_t{240} << 20;
  options.memory_limit_bytes.assign(4, limit);
  absl::StatusOr<StrategyChoice> data = s.Search(
      Parallelism::kData, 4, options, "", nullptr, StageRecompute::kNone);
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_EQ(data->strategy.zero, ZeroStage::kParameters)
      << DescribeStrategy(data->strategy);
  for (int64_t peak : data->simulation.step.peak_memory_bytes) {
    EXPECT_LE(peak, limit);
  }
}

// Eight 16 MiB weights with Adam: data parallelism holds 512 MiB per
// device (256 with ZeRO-2's shards), tensor parallelism over the four
// devices a quarter of each weight. Under 200 MiB only the latter fits of
// the two; tensor's search finds it, the chain's MatMuls alternating
// columns and rows.
TEST(StrategySearchTest, TensorParallelismFitsWhatDataParallelismCannot) {
  Scenario s(Chain(8, 2048), "p100x4", Optimizer::kAdam);
  PolicyOptions options;
  const int64_t limit = int64_t{200} << 20;
  options.memory_limit_bytes.assign(4, limit);
  absl::StatusOr<StrategyChoice> data = s.Search(
      Parallelism::kData, 4, options, "", nullptr, StageRecompute::kNone);
  EXPECT_EQ(data.status().code(), absl::StatusCode::kResourceExhausted)
      << data.status();
  absl::StatusOr<StrategyChoice> tensor = s.Search(
      Parallelism::kTensor, 4, options, "", nullptr, StageRecompute::kNone);
  ASSERT_TRUE(tensor.ok()) << tensor.status();
  const Strategy& t = tensor->strategy;
  EXPECT_GE(t.stages[0].tensor(), 2) << DescribeStrategy(t);
  for (int64_t peak : tensor->simulation.step.peak_memory_bytes) {
    EXPECT_LE(peak, limit);
  }
  absl::StatusOr<TensorSharding> sharding = ShardStrategy(s.graph, t);
  ASSERT_TRUE(sharding.ok()) << sharding.status();
  for (int i = 0; i < 8; ++i) {
    const int op = s.graph.FindOp("m" + std::to_string(i));
    EXPECT_EQ(OpShardingName(sharding->op[op]),
              i % 2 == 0 ? "out:1" : "contracted")
        << i;
  }
  EXPECT_GT(tensor->simulation.tensor_seconds, 0);
  // A group size that does not divide the devices is refused.
  absl::StatusOr<StrategyChoice> three =
      s.Search(Parallelism::kTensor, 4, options, "", nullptr,
               StageRecompute::kNone, std::nullopt, 3);
  EXPECT_EQ(three.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParallelismName(*ParseParallelism("tensor")), "tensor");
}

}  // namespace
}  // namespace placer
