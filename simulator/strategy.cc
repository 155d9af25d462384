#include "simulator/strategy.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_helpers.h"

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
  switch (algorithm) {
    case AllreduceAlgorithm::kRing:
      return "ring";
    case AllreduceAlgorithm::kTree:
      return "tree";
    case AllreduceAlgorithm::kHierarchical:
      return "hierarchical";
  }
  return "ring";
}

absl::StatusOr<AllreduceAlgorithm> ParseAllreduce(const std::string& name) {
  for (AllreduceAlgorithm a :
       {AllreduceAlgorithm::kRing, AllreduceAlgorithm::kTree,
        AllreduceAlgorithm::kHierarchical}) {
    if (name == AllreduceName(a)) return a;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown allreduce algorithm '", name,
                   "'; known: ring, tree, hierarchical"));
}

std::string RecomputeName(Recompute recompute) {
  switch (recompute) {
    case Recompute::kNone:
      return "none";
    case Recompute::kFull:
      return "full";
    case Recompute::kSelective:
      return "selective";
    case Recompute::kSelectiveOp:
      return "selective-op";
    case Recompute::kLayers:
      return "layers";
  }
  return "none";
}

absl::StatusOr<Recompute> ParseRecompute(const std::string& name) {
  for (Recompute r : {Recompute::kNone, Recompute::kFull, Recompute::kSelective,
                      Recompute::kSelectiveOp, Recompute::kLayers}) {
    if (name == RecomputeName(r)) return r;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown recomputation '", name,
                   "'; known: none, full, selective, selective-op, layers"));
}

int ZeroNumber(ZeroStage zero) {
  switch (zero) {
    case ZeroStage::kNone:
      return 0;
    case ZeroStage::kOptimizerState:
      return 1;
    case ZeroStage::kGradients:
      return 2;
    case ZeroStage::kParameters:
      return 3;
  }
  return 0;
}

absl::StatusOr<ZeroStage> ZeroFromNumber(int number) {
  for (ZeroStage zero : {ZeroStage::kNone, ZeroStage::kOptimizerState,
                         ZeroStage::kGradients, ZeroStage::kParameters}) {
    if (ZeroNumber(zero) == number) return zero;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "ZeRO stage ", number, " is not modelled; known: 0, 1, 2, 3"));
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
      return absl::InvalidArgumentError(
          absl::StrCat("op '", op_key(g), "' is in stage ", s,
                       "; the strategy has ", stages, " stages"));
    }
    ++ops_in[s];
  }
  std::vector<int> used(cluster.num_devices(), -1);
  int most_replicas = 0;
  auto use = [&](int s, int d) -> absl::Status {
    if (d < 0 || d >= cluster.num_devices()) {
      return absl::InvalidArgumentError(
          absl::StrCat("stage ", s, " names device ", d, "; ", cluster.name(),
                       " has ", cluster.num_devices()));
    }
    if (used[d] >= 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "device ", cluster.device(d).name, " is in stage ", used[d],
          " and stage ", s, "; a device runs one slot of one stage replica"));
    }
    used[d] = s;
    return absl::OkStatus();
  };
  for (int s = 0; s < stages; ++s) {
    const PipelineStage& stage = strategy.stages[s];
    if (ops_in[s] == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("stage ", s, " has no ops"));
    }
    if (stage.replicas.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("stage ", s, " has no devices"));
    }
    for (int k = 0; k < stage.num_replicas(); ++k) {
      const std::vector<int>& slots = stage.replicas[k].device_of_slot;
      const std::vector<int>& group = stage.replicas[k].tensor_devices;
      if (group.size() != stage.replicas[0].tensor_devices.size() ||
          group.size() == 1 ||
          (!group.empty() && (slots.size() != 1 || group[0] != slots[0]))) {
        return absl::InvalidArgumentError(absl::StrCat(
            "stage ", s, "'s replica ", k, " has a tensor-parallel group of ",
            group.size(), " devices, replica 0 ",
            stage.replicas[0].tensor_devices.size(),
            ": every replica of a tensor-parallel stage is one group of as "
            "many (at least 2), its first device the replica's only slot"));
      }
      for (size_t i = 1; i < group.size(); ++i) {
        RETURN_IF_ERROR(use(s, group[i]));
      }
      if (slots.empty() ||
          slots.size() != stage.replicas[0].device_of_slot.size()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "stage ", s, "'s replica ", k, " has ", slots.size(),
            " devices, replica 0 ", stage.replicas[0].device_of_slot.size(),
            ": every replica of a stage has as many, at least one"));
      }
      for (int d : slots) {
        RETURN_IF_ERROR(use(s, d));
      }
    }
    most_replicas = std::max(most_replicas, stage.num_replicas());
  }
  if (!strategy.slot_of_op.empty()) {
    if (static_cast<int>(strategy.slot_of_op.size()) != ops) {
      return absl::InvalidArgumentError(
          absl::StrCat("strategy gives a slot to ", strategy.slot_of_op.size(),
                       " ops; the model has ", ops));
    }
    for (int g = 0; g < ops; ++g) {
      const int s = strategy.stage_of_op[g];
      const int slot = strategy.slot_of_op[g];
      if (slot < 0 || slot >= strategy.stages[s].width()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "op '", op_key(g), "' is in slot ", slot, " of stage ", s,
            ", whose replicas have ", strategy.stages[s].width(), " devices"));
      }
    }
  }
  if (strategy.micro_batches < most_replicas) {
    return absl::InvalidArgumentError(
        absl::StrCat("strategy has ", strategy.micro_batches,
                     " micro-batches but a stage with ", most_replicas,
                     " replicas: every replica needs one"));
  }
  if (strategy.bucket_bytes <= 0) {
    return absl::InvalidArgumentError("allreduce bucket_bytes must be > 0");
  }
  if (strategy.zero != ZeroStage::kNone && most_replicas < 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ZeRO-", ZeroNumber(strategy.zero),
        " shards over a stage's data-parallel replicas, and no stage has "
        "more than one"));
  }
  if (ShardsGradients(strategy.zero)) {
    for (int s = 0; s < stages; ++s) {
      const int replicas = strategy.stages[s].num_replicas();
      if (strategy.micro_batches % replicas != 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            "ZeRO-", ZeroNumber(strategy.zero),
            " reduce-scatters every round of micro-batches: stage ", s, "'s ",
            replicas, " replicas need a multiple of ", replicas,
            " micro-batches; the strategy has ", strategy.micro_batches));
      }
      if (strategy.zero == ZeroStage::kParameters &&
          strategy.stages[s].width() > 1) {
        return absl::InvalidArgumentError(
            absl::StrCat("ZeRO-3 with ops placed inside stage ", s,
                         "'s replicas is not modelled"));
      }
    }
  }
  if (strategy.overlap_parameter_gather) {
    if (strategy.zero != ZeroStage::kOptimizerState &&
        strategy.zero != ZeroStage::kGradients) {
      return absl::InvalidArgumentError(absl::StrCat(
          "overlapping the parameter all-gather with the next step's forward "
          "needs ZeRO-1 or ZeRO-2, whose update all-gathers the parameters; "
          "the strategy has ZeRO-",
          ZeroNumber(strategy.zero),
          strategy.zero == ZeroStage::kParameters
              ? " (which gathers them in every pass already)"
              : " (no gather)"));
    }
    for (int s = 0; s < stages; ++s) {
      if (strategy.stages[s].width() > 1) {
        return absl::InvalidArgumentError(absl::StrCat(
            "an overlapped parameter all-gather with ops placed inside stage ",
            s, "'s replicas is not modelled"));
      }
    }
  }
  for (int s = 0; s < stages; ++s) {
    if (RecomputesInPart(strategy.stages[s].recompute) &&
        strategy.stages[s].width() > 1) {
      return absl::InvalidArgumentError(
          absl::StrCat(RecomputeName(strategy.stages[s].recompute),
                       " recomputation with ops placed inside stage ", s,
                       "'s replicas is not modelled"));
    }
  }
  for (int s = 0; s < stages; ++s) {
    if (strategy.stages[s].recompute == Recompute::kSelectiveOp &&
        strategy.stages[s].tensor() > 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "op-level selective recomputation (selective-op) in stage ", s,
          ", whose replicas are tensor-parallel groups, is not modelled (it "
          "reruns products whose collectives are not)"));
    }
  }
  if (!strategy.op_sharding.empty() &&
      static_cast<int>(strategy.op_sharding.size()) != ops) {
    return absl::InvalidArgumentError(
        absl::StrCat("strategy gives a tensor sharding to ",
                     strategy.op_sharding.size(), " ops; the model has ", ops));
  }
  if (HasTensorParallelism(strategy) || !strategy.op_sharding.empty()) {
    RETURN_IF_ERROR(ShardStrategy(view.forward(), strategy).status());
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
            "parameter '", value.name, "' lives in stage ", from, " but op '",
            reader.key, "' in stage ", to,
            " reads it: a strategy keeps every reader of a weight in its "
            "stage"));
      }
      if (to < from) {
        return absl::InvalidArgumentError(
            absl::StrCat("op '", reader.key, "' in stage ", to, " reads '",
                         value.name, "' made in the later stage ", from,
                         ": stages must follow the dataflow"));
      }
    }
  }
  return absl::OkStatus();
}

std::vector<ReplicaTask> ReplicaTaskOrder(const Strategy& strategy, int stage,
                                          int replica) {
  const int R = strategy.stages[stage].num_replicas();
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

PipelineStage PipelineStage::OneDevicePerReplica(
    const std::vector<int>& devices) {
  PipelineStage stage;
  for (int d : devices) stage.replicas.push_back({{d}});
  return stage;
}

PipelineStage PipelineStage::OfReplicas(
    const std::vector<std::vector<int>>& device_of_slot_per_replica) {
  PipelineStage stage;
  for (const std::vector<int>& slots : device_of_slot_per_replica) {
    stage.replicas.push_back({slots});
  }
  return stage;
}

PipelineStage PipelineStage::OfTensorGroups(
    const std::vector<std::vector<int>>& devices_per_replica) {
  PipelineStage stage;
  for (const std::vector<int>& group : devices_per_replica) {
    Replica replica;
    replica.device_of_slot = {group.empty() ? -1 : group[0]};
    if (group.size() > 1) replica.tensor_devices = group;
    stage.replicas.push_back(std::move(replica));
  }
  return stage;
}

int PipelineStage::tensor() const {
  return replicas.empty() || replicas[0].tensor_devices.empty()
             ? 1
             : static_cast<int>(replicas[0].tensor_devices.size());
}

std::vector<int> PipelineStage::TensorGroup(int replica) const {
  const Replica& r = replicas[replica];
  return r.tensor_devices.empty() ? std::vector<int>{r.device_of_slot[0]}
                                  : r.tensor_devices;
}

bool HasTensorParallelism(const Strategy& strategy) {
  for (const PipelineStage& stage : strategy.stages) {
    if (stage.tensor() > 1) return true;
  }
  return false;
}

absl::StatusOr<TensorSharding> ShardStrategy(const Graph& graph,
                                             const Strategy& strategy) {
  std::vector<int> sizes;
  for (const PipelineStage& stage : strategy.stages) {
    sizes.push_back(stage.tensor());
  }
  TensorShardingOptions options;
  options.sequence_parallel = strategy.sequence_parallel;
  return ShardTensors(graph, strategy.stage_of_op, sizes, strategy.op_sharding,
                      options);
}

int PipelineStage::width() const {
  return replicas.empty() || replicas[0].device_of_slot.empty()
             ? 1
             : static_cast<int>(replicas[0].device_of_slot.size());
}

std::vector<int> PipelineStage::FirstDevices() const {
  std::vector<int> out;
  for (const Replica& r : replicas) out.push_back(r.device_of_slot[0]);
  return out;
}

int SlotOfOp(const Strategy& strategy, int op) {
  return strategy.slot_of_op.empty() ? 0 : strategy.slot_of_op[op];
}

std::vector<int> SlotDevices(const PipelineStage& stage, int slot) {
  std::vector<int> out;
  for (const Replica& r : stage.replicas) out.push_back(r.device_of_slot[slot]);
  return out;
}

Placement FirstReplicaPlacement(const Strategy& strategy) {
  Placement p;
  p.device_of_op.reserve(strategy.stage_of_op.size());
  for (size_t g = 0; g < strategy.stage_of_op.size(); ++g) {
    p.device_of_op.push_back(strategy.stages[strategy.stage_of_op[g]].device(
        0, SlotOfOp(strategy, static_cast<int>(g))));
  }
  return p;
}

Strategy StrategyOfPlacement(const Placement& placement, int micro_batches) {
  std::vector<int> devices = placement.device_of_op;
  std::sort(devices.begin(), devices.end());
  devices.erase(std::unique(devices.begin(), devices.end()), devices.end());
  Strategy strategy;
  strategy.stage_of_op.assign(placement.device_of_op.size(), 0);
  strategy.slot_of_op.reserve(placement.device_of_op.size());
  for (int d : placement.device_of_op) {
    strategy.slot_of_op.push_back(static_cast<int>(
        std::lower_bound(devices.begin(), devices.end(), d) - devices.begin()));
  }
  strategy.stages = {PipelineStage::OfReplicas({devices})};
  strategy.micro_batches = micro_batches;
  if (micro_batches > 1) strategy.schedule = PipelineSchedule::k1F1B;
  return strategy;
}

int StrategyDevices(const Strategy& strategy) {
  int n = 0;
  for (const PipelineStage& s : strategy.stages) {
    n += s.num_replicas() * s.width() * s.tensor();
  }
  return n;
}

std::string DescribeStrategy(const Strategy& strategy) {
  std::vector<int> replicas, widths, recomputing, selective, op_level, by_layer,
      tensors;
  bool wide = false, tensor = false;
  for (const PipelineStage& s : strategy.stages) {
    tensors.push_back(s.tensor());
    tensor |= s.tensor() > 1;
    if (s.recompute == Recompute::kFull) {
      recomputing.push_back(static_cast<int>(replicas.size()));
    } else if (s.recompute == Recompute::kSelective) {
      selective.push_back(static_cast<int>(replicas.size()));
    } else if (s.recompute == Recompute::kSelectiveOp) {
      op_level.push_back(static_cast<int>(replicas.size()));
    } else if (s.recompute == Recompute::kLayers) {
      by_layer.push_back(static_cast<int>(replicas.size()));
    }
    replicas.push_back(s.num_replicas());
    widths.push_back(s.width());
    wide |= widths.back() > 1;
  }
  std::string recompute;
  auto which = [&](const std::vector<int>& stages, const char* name) {
    if (stages.size() == strategy.stages.size()) {
      absl::StrAppend(&recompute, ", ", name);
    } else if (!stages.empty()) {
      absl::StrAppend(&recompute, ", ", name, " stage",
                      stages.size() > 1 ? "s " : " ",
                      absl::StrJoin(stages, ", "));
    }
  };
  which(recomputing, "recompute");
  which(selective, "selective recompute");
  which(op_level, "op-level selective recompute");
  which(by_layer, "recompute by layer");
  auto list = [](const std::vector<int>& v) {
    return v.size() == 1 ? absl::StrCat(v[0])
                         : absl::StrCat("(", absl::StrJoin(v, ", "), ")");
  };
  return absl::StrCat(
      strategy.stages.size(),
      strategy.stages.size() == 1 ? " stage x " : " stages x ", list(replicas),
      " replicas", wide ? absl::StrCat(" of ", list(widths), " devices") : "",
      tensor ? absl::StrCat(
                   " of tensor ", list(tensors),
                   strategy.sequence_parallel ? " (sequence parallel)" : "")
             : "",
      ", ", strategy.micro_batches, " micro-batches, ",
      ScheduleName(strategy.schedule), ", ", AllreduceName(strategy.allreduce),
      recompute,
      strategy.zero == ZeroStage::kNone
          ? ""
          : absl::StrCat(", zero-", ZeroNumber(strategy.zero),
                         strategy.overlap_parameter_gather
                             ? ", gather overlapped"
                             : ""));
}

}  // namespace placer
