// What the distributed strategy tests share: a strategy run for kSteps
// steps in one process or as ranks (threads of the test, each with its
// own c10d store connection, Gloo group and executor), two runs compared
// (losses, parameters, tensor-parallel parts, ZeRO-3's shards), the models
// they run and the strategies they cut.
#ifndef PLACER_TESTS_RUNTIME_DISTRIBUTED_RUNS_H_
#define PLACER_TESTS_RUNTIME_DISTRIBUTED_RUNS_H_

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "graph/onnx_import.h"
#include "graph/training_view.h"
#include "gtest/gtest.h"
#include "profiles/cluster.h"
#include "runtime/rank_group.h"
#include "runtime/strategy_executor.h"
#include "simulator/strategy.h"
#include "tests/runtime/cpu_cluster.h"
#include "tests/runtime/rank_threads.h"
#include "tests/runtime/strategy_test_models.h"
#include "zoo/zoo.h"

namespace placer {

inline constexpr int kSteps = 3;

struct RunResult {
  absl::Status status;
  std::vector<double> losses;
  // (name, replica) -> value, from whichever rank holds it; under ZeRO-2
  // and -3 also the replica's shard (ZeRO-3 across ranks: only that).
  std::map<std::pair<std::string, int>, torch::Tensor> parameters, shards;
  // Tensor parallelism: (name, replica * 16 + tensor rank) -> its part.
  std::map<std::pair<std::string, int>, torch::Tensor> parts;
  // The last step's node runs, every rank's (each rank's report has all),
  // and its tracked peaks (an op placement's; every rank's, merged).
  size_t node_runs = 0;
  std::vector<int64_t> peak_memory_bytes;
};

inline std::vector<std::string> ParameterNames(const TrainingView& view) {
  std::vector<std::string> names;
  for (const TrainingValue& v : view.values()) {
    if (v.kind == ValueKind::kParameter) names.push_back(v.name);
  }
  return names;
}

inline ExecutorOptions Options() {
  ExecutorOptions o;
  o.seed = 11;
  o.update.learning_rate = 0.01;
  return o;
}

inline void Collect(const TrainingView& view, StrategyExecutor& e,
                    RunResult* out) {
  for (const std::string& name : ParameterNames(view)) {
    for (int k = 0; k < 4; ++k) {
      absl::StatusOr<torch::Tensor> t = e.Parameter(name, k);
      if (t.ok()) out->parameters[{name, k}] = *t;
      absl::StatusOr<torch::Tensor> shard = e.ParameterShard(name, k);
      if (shard.ok()) out->shards[{name, k}] = *shard;
      for (int r = 0; r < 2; ++r) {
        absl::StatusOr<torch::Tensor> part = e.ParameterPart(name, k, r);
        if (part.ok()) out->parts[{name, k * 16 + r}] = *part;
      }
    }
  }
}

inline RunResult RunOneProcess(const TrainingView& view, const Cluster& cluster,
                               const Strategy& strategy, int steps = kSteps) {
  RunResult result;
  auto e = StrategyExecutor::Create(view, cluster, strategy, Options());
  if (!e.ok()) return {e.status()};
  for (int s = 0; s < steps; ++s) {
    absl::StatusOr<StepReport> r = (*e)->Step();
    if (!r.ok()) return {r.status()};
    result.losses.push_back(r->loss);
    result.node_runs = r->node_runs.size();
    result.peak_memory_bytes = r->peak_memory_bytes;
  }
  Collect(view, **e, &result);
  return result;
}

// `world` ranks, devices in consecutive blocks; `stall_rank` never steps
// (it keeps its connections open until the others have given up).
inline RunResult RunRanks(const TrainingView& view, const Cluster& cluster,
                          const Strategy& strategy, int world,
                          double timeout_seconds = 30, int stall_rank = -1,
                          int steps = kSteps,
                          int64_t exchange_chunk_bytes = 0) {
  std::vector<int> process(cluster.num_devices(), -1);
  absl::StatusOr<std::vector<int>> ranks = RanksOfDevices(process, world);
  EXPECT_TRUE(ranks.ok()) << ranks.status();
  std::vector<RunResult> per_rank(world);
  RunRankThreads(
      world, timeout_seconds,
      [&](int rank, absl::StatusOr<std::shared_ptr<RankGroup>> group) {
        RunResult& out = per_rank[rank];
        if (!group.ok()) {
          out.status = group.status();
          return;
        }
        ExecutorOptions options = Options();
        options.ranks = *group;
        options.rank_of_device = *ranks;
        if (exchange_chunk_bytes > 0) {
          options.exchange_chunk_bytes = exchange_chunk_bytes;
        }
        auto e = StrategyExecutor::Create(view, cluster, strategy, options);
        if (!e.ok()) {
          out.status = e.status();
          return;
        }
        for (int s = 0; s < steps; ++s) {
          if (rank == stall_rank) {
            std::this_thread::sleep_for(std::chrono::milliseconds(
                static_cast<int>(timeout_seconds * 2500)));
            out.status = absl::AbortedError("stalled on purpose");
            return;
          }
          absl::StatusOr<StepReport> r = (*e)->Step();
          if (!r.ok()) {
            out.status = r.status();
            return;
          }
          out.losses.push_back(r->loss);
          out.node_runs = r->node_runs.size();
          out.peak_memory_bytes = r->peak_memory_bytes;
        }
        Collect(view, **e, &out);
      });
  RunResult result;
  for (int r = 0; r < world; ++r) {
    if (!per_rank[r].status.ok() && result.status.ok()) {
      result.status = per_rank[r].status;
    }
    if (r > 0 && per_rank[r].status.ok() && per_rank[0].status.ok()) {
      EXPECT_EQ(per_rank[r].losses, per_rank[0].losses) << "rank " << r;
      EXPECT_EQ(per_rank[r].node_runs, per_rank[0].node_runs) << "rank " << r;
      EXPECT_EQ(per_rank[r].peak_memory_bytes, per_rank[0].peak_memory_bytes)
          << "rank " << r;
    }
    for (auto& [key, t] : per_rank[r].parameters) {
      EXPECT_EQ(result.parameters.count(key), 0u)
          << key.first << " replica " << key.second << " on two ranks";
      result.parameters[key] = t;
    }
    for (auto& [key, t] : per_rank[r].shards) result.shards[key] = t;
    for (auto& [key, t] : per_rank[r].parts) result.parts[key] = t;
  }
  result.losses = per_rank[0].losses;
  result.node_runs = per_rank[0].node_runs;
  result.peak_memory_bytes = per_rank[0].peak_memory_bytes;
  return result;
}

inline void ExpectSameLosses(const RunResult& a, const RunResult& b) {
  ASSERT_TRUE(a.status.ok()) << a.status;
  ASSERT_TRUE(b.status.ok()) << b.status;
  ASSERT_GE(a.losses.size(), static_cast<size_t>(kSteps));
  ASSERT_EQ(b.losses.size(), a.losses.size());
  for (size_t s = 0; s < a.losses.size(); ++s) {
    EXPECT_NEAR(a.losses[s], b.losses[s],
                1e-5 * std::max(1.0, std::abs(a.losses[s])))
        << "step " << s + 1;
  }
  EXPECT_NE(a.losses.front(), a.losses.back());  // training moved
}

inline void ExpectSame(const RunResult& a, const RunResult& b) {
  ExpectSameLosses(a, b);
  if (::testing::Test::HasFatalFailure()) return;
  ASSERT_EQ(a.parameters.size(), b.parameters.size());
  for (const auto& [key, t] : a.parameters) {
    auto it = b.parameters.find(key);
    ASSERT_NE(it, b.parameters.end()) << key.first << " replica " << key.second;
    EXPECT_TRUE(torch::allclose(t, it->second, 1e-5, 1e-5))
        << key.first << " replica " << key.second << ": max difference "
        << (t - it->second).abs().max().item<double>();
  }
}

// The same losses, and every part of every parameter each tensor-parallel
// group's devices hold (a group over ranks, where no rank holds a split
// parameter whole).
inline void ExpectSameParts(const RunResult& a, const RunResult& b) {
  ExpectSameLosses(a, b);
  if (::testing::Test::HasFatalFailure()) return;
  ASSERT_FALSE(a.parts.empty());
  ASSERT_EQ(a.parts.size(), b.parts.size());
  for (const auto& [key, t] : a.parts) {
    auto it = b.parts.find(key);
    ASSERT_NE(it, b.parts.end()) << key.first << " part " << key.second;
    EXPECT_TRUE(torch::allclose(t, it->second, 1e-5, 1e-5))
        << key.first << " part " << key.second;
  }
}

// The same losses, and every replica's shard of every parameter (ZeRO-3
// across ranks, where no rank holds a parameter whole).
inline void ExpectSameShards(const RunResult& a, const RunResult& b) {
  ExpectSameLosses(a, b);
  if (::testing::Test::HasFatalFailure()) return;
  ASSERT_FALSE(a.shards.empty());
  ASSERT_EQ(a.shards.size(), b.shards.size());
  for (const auto& [key, t] : a.shards) {
    auto it = b.shards.find(key);
    ASSERT_NE(it, b.shards.end()) << key.first << " replica " << key.second;
    EXPECT_TRUE(torch::allclose(t, it->second, 1e-5, 1e-5))
        << key.first << " replica " << key.second;
  }
}

// Two stages cut after the first `first` groups in topological order of
// their forward ops, as long as no weight spans the cut (CheckStrategy).
inline Strategy TwoStages(const TrainingView& view, const Cluster& cluster,
                          std::vector<int> first_devices,
                          std::vector<int> second_devices) {
  const int groups = view.num_groups();
  for (int cut = groups / 2; cut < groups; ++cut) {
    Strategy s;
    s.stage_of_op.assign(groups, 1);
    int seen = 0;
    for (int n : view.topological_order()) {
      if (view.node(n).kind != NodeKind::kForward) continue;
      s.stage_of_op[view.node(n).forward_op] = seen++ < cut ? 0 : 1;
    }
    s.stages = {PipelineStage::OneDevicePerReplica(first_devices),
                PipelineStage::OneDevicePerReplica(second_devices)};
    s.micro_batches = 4;
    s.schedule = PipelineSchedule::k1F1B;
    if (CheckStrategy(view, cluster, s).ok()) return s;
  }
  ADD_FAILURE() << "no legal cut";
  return {};
}

// Two replicas of two devices each, every other op of the model on the
// second (values, weights and partial gradients cross slots both ways).
inline Strategy WideReplicas(const TrainingView& view) {
  Strategy s;
  s.stage_of_op.assign(view.num_groups(), 0);
  s.slot_of_op.assign(view.num_groups(), 0);
  int seen = 0;
  for (int n : view.topological_order()) {
    if (view.node(n).kind != NodeKind::kForward) continue;
    s.slot_of_op[view.node(n).forward_op] = seen++ % 2;
  }
  s.stages = {PipelineStage::OfReplicas({{0, 1}, {2, 3}})};
  s.micro_batches = 4;
  return s;
}

// Every other forward op of each stage of `s` that spans two devices on
// its second slot.
inline void AlternateSlots(const TrainingView& view, Strategy* s) {
  s->slot_of_op.assign(view.num_groups(), 0);
  std::vector<int> seen(s->stages.size(), 0);
  for (int n : view.topological_order()) {
    if (view.node(n).kind != NodeKind::kForward) continue;
    const int op = view.node(n).forward_op;
    const int stage = s->stage_of_op[op];
    if ((s->stages[stage]).width() < 2) continue;
    s->slot_of_op[op] = seen[stage]++ % 2;
  }
}

// The models the wide-replica tests run: the zoo's GNMT-2, PyTorch's
// exported Transformer and the training-mode BatchNorm CNN (opset 13).
inline std::vector<std::pair<std::string, Graph>> WideTestModels() {
  std::vector<std::pair<std::string, Graph>> models;
  models.emplace_back("gnmt2", Gnmt2());
  models.emplace_back("transformer", Transformer());
  models.emplace_back("bn_cnn.op13", TrainingExport("bn_cnn.op13"));
  return models;
}

}  // namespace placer

#endif  // PLACER_TESTS_RUNTIME_DISTRIBUTED_RUNS_H_
