#include "simulator/strategy.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace placer {

std::string ScheduleName(PipelineSchedule schedule) {
  return schedule == PipelineSchedule::kGPipe ? "gpipe" : "1f1b";
}

absl::StatusOr<PipelineSchedule> ParseSchedule(const std::string& name) {
  if (name == ScheduleName(PipelineSchedule::kGPipe)) {
    return PipelineSchedule::kGPipe;
  }
  if (name == ScheduleName(PipelineSchedule::k1F1B)) {
    return PipelineSchedule::k1F1B;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown pipeline schedule '", name, "'; known: gpipe, 1f1b"));
}

std::string AllreduceName(AllreduceAlgorithm algorithm) {
  return algorithm == AllreduceAlgorithm::kRing ? "ring" : "tree";
}

absl::StatusOr<AllreduceAlgorithm> ParseAllreduce(const std::string& name) {
  if (name == AllreduceName(AllreduceAlgorithm::kRing)) {
    return AllreduceAlgorithm::kRing;
  }
  if (name == AllreduceName(AllreduceAlgorithm::kTree)) {
    return AllreduceAlgorithm::kTree;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown allreduce algorithm '", name, "'; known: ring, tree"));
}

absl::Status CheckStrategy(const TrainingView& view, const Cluster& cluster,
                           const Strategy& strategy) {
  const int ops = view.num_groups();
  const int stages = static_cast<int>(strategy.stages.size());
  if (stages == 0) return absl::InvalidArgumentError("strategy has no stages");
  if (static_cast<int>(strategy.stage_of_op.size()) != ops) {
    return absl::InvalidArgumentError(
        absl::StrCat("strategy gives a stage to ", strategy.stage_of_op.size(),
                     " ops; the model has ", ops));
  }
  auto op_key = [&](int g) { return view.node(view.group_nodes(g)[0]).key; };
  std::vector<int> ops_in(stages, 0);
  for (int g = 0; g < ops; ++g) {
    int s = strategy.stage_of_op[g];
    if (s < 0 || s >= stages) {
      return absl::InvalidArgumentError(absl::StrCat(
          "op '", op_key(g), "' is in stage ", s, "; the strategy has ",
          stages, " stages"));
    }
    ++ops_in[s];
  }
  std::vector<int> used(cluster.num_devices(), -1);
  int most_replicas = 0;
  for (int s = 0; s < stages; ++s) {
    const std::vector<int>& devices = strategy.stages[s].devices;
    if (ops_in[s] == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("stage ", s, " has no ops"));
    }
    if (devices.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("stage ", s, " has no devices"));
    }
    for (int d : devices) {
      if (d < 0 || d >= cluster.num_devices()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "stage ", s, " names device ", d, "; ", cluster.name(), " has ",
            cluster.num_devices()));
      }
      if (used[d] >= 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            "device ", cluster.device(d).name, " is in stage ", used[d],
            " and stage ", s, "; a device runs one stage replica"));
      }
      used[d] = s;
    }
    most_replicas = std::max(most_replicas,
                             static_cast<int>(devices.size()));
  }
  if (strategy.micro_batches < most_replicas) {
    return absl::InvalidArgumentError(absl::StrCat(
        "strategy has ", strategy.micro_batches,
        " micro-batches but a stage with ", most_replicas,
        " replicas: every replica needs one"));
  }
  if (strategy.bucket_bytes <= 0) {
    return absl::InvalidArgumentError("allreduce bucket_bytes must be > 0");
  }
  std::vector<int> home_stage(view.values().size(), -1);
  for (int g = 0; g < ops; ++g) {
    for (int v : view.group_parameters(g)) {
      home_stage[v] = strategy.stage_of_op[g];
    }
  }
  for (int v = 0; v < static_cast<int>(view.values().size()); ++v) {
    const TrainingValue& value = view.value(v);
    int from = -1;
    bool parameter = value.kind == ValueKind::kParameter;
    if (parameter) {
      from = home_stage[v];
    } else if (value.producer >= 0 &&
               view.node(value.producer).kind == NodeKind::kForward) {
      from = strategy.stage_of_op[view.node(value.producer).forward_op];
    }
    if (from < 0) continue;
    for (int c : value.consumers) {
      const TrainingNode& reader = view.node(c);
      if (reader.kind != NodeKind::kForward) continue;
      int to = strategy.stage_of_op[reader.forward_op];
      if (parameter && to != from) {
        return absl::InvalidArgumentError(absl::StrCat(
            "parameter '", value.name, "' lives in stage ", from,
            " but op '", reader.key, "' in stage ", to,
            " reads it: a strategy keeps every reader of a weight in its "
            "stage"));
      }
      if (to < from) {
        return absl::InvalidArgumentError(absl::StrCat(
            "op '", reader.key, "' in stage ", to, " reads '", value.name,
            "' made in the later stage ", from,
            ": stages must follow the dataflow"));
      }
    }
  }
  return absl::OkStatus();
}

std::vector<ReplicaTask> ReplicaTaskOrder(const Strategy& strategy, int stage,
                                          int replica) {
  const int R = static_cast<int>(strategy.stages[stage].devices.size());
  const int S = static_cast<int>(strategy.stages.size());
  std::vector<int> mine;
  for (int j = replica; j < strategy.micro_batches; j += R) mine.push_back(j);
  const int n = static_cast<int>(mine.size());
  std::vector<ReplicaTask> order;
  if (strategy.schedule == PipelineSchedule::kGPipe) {
    for (int j : mine) order.push_back({j, false});
    for (int i = n - 1; i >= 0; --i) order.push_back({mine[i], true});
    return order;
  }
  const int warm = std::min(n, S - stage - 1);
  for (int i = 0; i < warm; ++i) order.push_back({mine[i], false});
  for (int i = warm; i < n; ++i) {
    order.push_back({mine[i], false});
    order.push_back({mine[i - warm], true});
  }
  for (int i = n - warm; i < n; ++i) order.push_back({mine[i], true});
  return order;
}

Placement FirstReplicaPlacement(const Strategy& strategy) {
  Placement p;
  p.device_of_op.reserve(strategy.stage_of_op.size());
  for (int s : strategy.stage_of_op) {
    p.device_of_op.push_back(strategy.stages[s].devices[0]);
  }
  return p;
}

int StrategyDevices(const Strategy& strategy) {
  int n = 0;
  for (const PipelineStage& s : strategy.stages) {
    n += static_cast<int>(s.devices.size());
  }
  return n;
}

std::string DescribeStrategy(const Strategy& strategy) {
  std::vector<int> replicas;
  for (const PipelineStage& s : strategy.stages) {
    replicas.push_back(static_cast<int>(s.devices.size()));
  }
  return absl::StrCat(strategy.stages.size(),
                      strategy.stages.size() == 1 ? " stage x " : " stages x ",
                      replicas.size() == 1
                          ? absl::StrCat(replicas[0])
                          : absl::StrCat("(", absl::StrJoin(replicas, ", "),
                                         ")"),
                      " replicas, ", strategy.micro_batches,
                      " micro-batches, ", ScheduleName(strategy.schedule), ", ",
                      AllreduceName(strategy.allreduce));
}

}  // namespace placer
