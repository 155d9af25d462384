// The strategy executor as ranks with recomputation and ZeRO: recomputing
// stages keep what another rank sent until their backward reruns it;
// ZeRO-1, -2 and -3 over replicas and stages across ranks; the replicas'
// exchanges in chunks; layers recomputed under ZeRO-3. Each gives one
// process's losses and parameters (or shards). The rest:
// distributed_strategy_test.cc.
#include "tests/runtime/distributed_runs.h"

namespace placer {
namespace {

// Recomputing stages as ranks: a stage keeps the values another rank sent
// it until its backward reruns its forward (whole, or selectively: each
// op without a weight when a backward needs it); the losses and
// parameters of the same stages without recomputation, in one process
// and as two ranks.
TEST(DistributedStrategyTest, RecomputingStagesAcrossRanks) {
  const Cluster cluster = Cpus(4);
  Graph graph = Transformer();
  TrainingView view = BuildTrainingView(graph);
  Strategy keep = TwoStages(view, cluster, {0, 1}, {2, 3});
  for (PipelineStage& stage : keep.stages) stage.recompute = Recompute::kNone;
  RunResult one = RunOneProcess(view, cluster, keep);
  for (Recompute recompute : {Recompute::kFull, Recompute::kSelective}) {
    Strategy split = keep;
    for (PipelineStage& stage : split.stages) stage.recompute = recompute;
    SCOPED_TRACE(DescribeStrategy(split));
    ExpectSame(one, RunOneProcess(view, cluster, split));
    ExpectSame(one, RunRanks(view, cluster, split, 2));
  }
}

// ZeRO-1 over four replicas as two ranks of two: each replica updates its
// shard of every parameter and sends the shards to the other rank, whose
// replicas copy them: one process's losses and parameters, and those of the
// same replicas without ZeRO.
TEST(DistributedStrategyTest, ZeroOneAcrossRanks) {
  const Cluster cluster = Cpus(4);
  for (auto& [name, graph] : std::vector<std::pair<std::string, Graph>>{
           {"gnmt2", Gnmt2()}, {"transformer", Transformer()}}) {
    SCOPED_TRACE(name);
    TrainingView view = BuildTrainingView(graph);
    Strategy data;
    data.stage_of_op.assign(view.num_groups(), 0);
    data.stages = {PipelineStage::OneDevicePerReplica({0, 1, 2, 3})};
    data.micro_batches = 4;
    Strategy zero = data;
    zero.zero = ZeroStage::kOptimizerState;
    RunResult one = RunOneProcess(view, cluster, data);
    ExpectSame(one, RunOneProcess(view, cluster, zero));
    ExpectSame(one, RunRanks(view, cluster, zero, 2));
  }
}

// The replicas' exchanges across ranks in chunks of at most 4 KiB (the
// allreduce's gradients; ZeRO-2's and -3's per-round reduce-scatter;
// ZeRO-1's and -2's updated parameters), four replicas on two ranks (two a
// process: each chunk one call per rank): one process's losses and
// parameters (ZeRO-3: its shards, as one process's ZeRO-3 has them).
TEST(DistributedStrategyTest, ExchangesInChunksGiveOneProcesssResults) {
  const Cluster cluster = Cpus(4);
  Graph graph = Gnmt2();
  TrainingView view = BuildTrainingView(graph);
  int64_t largest = 0, total = 0;
  for (const TrainingValue& v : view.values()) {
    if (v.kind != ValueKind::kParameter) continue;
    largest = std::max(largest, v.bytes);
    total += v.bytes;
  }
  ASSERT_GT(total, 8 * 4096);  // many chunks
  ASSERT_GT(largest, 4096);    // and parameters that are a chunk alone
  Strategy data;
  data.stage_of_op.assign(view.num_groups(), 0);
  data.stages = {PipelineStage::OneDevicePerReplica({0, 1, 2, 3})};
  data.micro_batches = 4;
  const RunResult one = RunOneProcess(view, cluster, data);
  for (ZeroStage zero : {ZeroStage::kNone, ZeroStage::kOptimizerState,
                         ZeroStage::kGradients}) {
    SCOPED_TRACE(static_cast<int>(zero));
    Strategy plan = data;
    plan.zero = zero;
    ExpectSame(one, RunRanks(view, cluster, plan, 2, 30, -1, kSteps,
                             /*exchange_chunk_bytes=*/4096));
  }
  Strategy three = data;
  three.zero = ZeroStage::kParameters;
  ExpectSameShards(RunOneProcess(view, cluster, three),
                   RunRanks(view, cluster, three, 2, 30, -1, kSteps,
                            /*exchange_chunk_bytes=*/4096));
}

// ZeRO-2 and ZeRO-3 in one process, over two stages of two replicas each
// (GPipe and 1F1B; ZeRO-3 also with recomputing stages, whose reruns
// gather the parameters again), and as two ranks, over four replicas and
// over two stages whose replicas are on both ranks: one process's losses
// and parameters without ZeRO (ZeRO-3 across ranks: its shards, as one
// process's ZeRO-3 has them).
TEST(DistributedStrategyTest, ZeroTwoAndThreeOverStagesAndRanks) {
  const Cluster cluster = Cpus(4);
  for (auto& [name, graph] : std::vector<std::pair<std::string, Graph>>{
           {"gnmt2", Gnmt2()}, {"transformer", Transformer()}}) {
    SCOPED_TRACE(name);
    TrainingView view = BuildTrainingView(graph);
    Strategy pipeline = TwoStages(view, cluster, {0, 1}, {2, 3});
    for (PipelineSchedule schedule :
         {PipelineSchedule::kGPipe, PipelineSchedule::k1F1B}) {
      pipeline.schedule = schedule;
      RunResult one = RunOneProcess(view, cluster, pipeline);
      for (ZeroStage zero : {ZeroStage::kGradients, ZeroStage::kParameters}) {
        for (Recompute recompute : {Recompute::kNone, Recompute::kFull}) {
          if (recompute == Recompute::kFull && zero != ZeroStage::kParameters) {
            continue;
          }
          Strategy sharded = pipeline;
          sharded.zero = zero;
          for (PipelineStage& stage : sharded.stages) {
            stage.recompute = recompute;
          }
          SCOPED_TRACE(DescribeStrategy(sharded));
          ExpectSame(one, RunOneProcess(view, cluster, sharded));
        }
      }
    }
    // ZeRO-2 across two ranks: four replicas of one stage, and two stages
    // whose replicas are on both ranks (each round's parts for the other
    // rank's shards go as one bucket, the updated shards after the step).
    Strategy data;
    data.stage_of_op.assign(view.num_groups(), 0);
    data.stages = {PipelineStage::OneDevicePerReplica({0, 1, 2, 3})};
    data.micro_batches = 4;
    Strategy across = TwoStages(view, cluster, {0, 2}, {1, 3});
    for (const Strategy& plain : {data, across}) {
      Strategy zero = plain;
      zero.zero = ZeroStage::kGradients;
      SCOPED_TRACE(DescribeStrategy(zero));
      const RunResult one = RunOneProcess(view, cluster, plain);
      ExpectSame(one, RunRanks(view, cluster, zero, 2));
      // ZeRO-3: each gather exchanges the shards between the ranks; no
      // rank holds a parameter whole, so the shards are compared with
      // one process's, whose whole parameters are one device's.
      zero.zero = ZeroStage::kParameters;
      for (Recompute recompute : {Recompute::kNone, Recompute::kFull}) {
        for (PipelineStage& stage : zero.stages) stage.recompute = recompute;
        SCOPED_TRACE(DescribeStrategy(zero));
        const RunResult threads = RunOneProcess(view, cluster, zero);
        ExpectSame(one, threads);
        ExpectSameShards(threads, RunRanks(view, cluster, zero, 2));
      }
    }
  }
}

// Each layer recomputed (--recompute layers) with ZeRO-3 on the zoo's
// Llama, four replicas over two ranks: each layer's rerun gathers its
// weights once more (one exchange between the ranks); one process's
// shards, whose whole parameters are one device's without either.
TEST(DistributedStrategyTest, LayersRecomputedWithZeroThreeAcrossRanks) {
  const Cluster cluster = Cpus(4);
  zoo::ZooParams p;
  p.layers = 2;
  p.hidden = 32;
  p.heads = 4;
  p.kv_heads = 2;
  p.ffn = 64;
  p.seq_len = 8;
  p.vocab = 40;
  p.batch_size = 2;
  absl::StatusOr<Graph> graph =
      ImportOnnxModel(*zoo::BuildZooModel("llama", p), "zoo:llama", {});
  ASSERT_TRUE(graph.ok()) << graph.status();
  TrainingView view = BuildTrainingView(*graph);
  Strategy data;
  data.stage_of_op.assign(view.num_groups(), 0);
  data.stages = {PipelineStage::OneDevicePerReplica({0, 1, 2, 3})};
  data.micro_batches = 4;
  Strategy zero = data;
  zero.zero = ZeroStage::kParameters;
  zero.stages[0].recompute = Recompute::kLayers;
  const RunResult threads = RunOneProcess(view, cluster, zero);
  ExpectSame(RunOneProcess(view, cluster, data), threads);
  ExpectSameShards(threads, RunRanks(view, cluster, zero, 2));
}

}  // namespace
}  // namespace placer
