#include "simulator/placement_file.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_helpers.h"
#include "google/protobuf/util/json_util.h"
#include "profiles/proto_io.h"
#include "simulator/placement.pb.h"

namespace placer {

absl::StatusOr<Placement> ParsePlacementJson(const std::string& json,
                                             const std::string& source,
                                             const Graph& graph,
                                             const Cluster& cluster) {
  proto::Placement file;
  auto status = google::protobuf::util::JsonStringToMessage(json, &file);
  if (!status.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": not a placement file: ",
                     status.message().as_string()));
  }
  return PlacementFromProto(file, source, graph, cluster);
}

absl::StatusOr<Placement> PlacementFromProto(const proto::Placement& file,
                                             const std::string& source,
                                             const Graph& graph,
                                             const Cluster& cluster) {
  auto fail = [&](const std::string& message) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": ", message));
  };
  for (const std::string& d : file.devices()) {
    if (cluster.FindDevice(d) < 0) {
      return fail(absl::StrCat("device '", d, "' is not in cluster '",
                               cluster.name(), "'"));
    }
  }
  Placement p;
  p.device_of_op.assign(graph.ops().size(), -1);
  std::vector<std::string> unknown;
  for (const auto& [key, device] : file.assignment()) {
    int op = graph.FindOp(key);
    if (op < 0) {
      unknown.push_back(key);
      continue;
    }
    int d = cluster.FindDevice(device);
    if (d < 0) {
      return fail(absl::StrCat("node '", key, "' is assigned to '", device,
                               "', which is not a device of cluster '",
                               cluster.name(), "'"));
    }
    p.device_of_op[op] = d;
  }
  if (!unknown.empty()) {
    std::sort(unknown.begin(), unknown.end());
    return fail(absl::StrCat(unknown.size(),
                             " assigned keys are not nodes of the graph, "
                             "e.g. '",
                             unknown.front(), "'"));
  }
  std::vector<std::string> missing;
  for (size_t i = 0; i < p.device_of_op.size(); ++i) {
    if (p.device_of_op[i] < 0) missing.push_back(graph.op(i).key);
  }
  if (!missing.empty()) {
    if (missing.size() > 5) missing.resize(5);
    return fail(absl::StrCat(
        graph.ops().size() -
            std::count_if(p.device_of_op.begin(), p.device_of_op.end(),
                          [](int d) { return d >= 0; }),
        " forward ops have no device, e.g. ", absl::StrJoin(missing, ", ")));
  }
  return p;
}

proto::Placement PlacementToProto(const Placement& placement,
                                  const Graph& graph, const Cluster& cluster,
                                  const PlacementInfo& info) {
  proto::Placement file;
  file.set_model(info.model);
  file.set_policy(info.policy);
  file.set_predicted_step_seconds(info.predicted_step_seconds);
  for (const Device& d : cluster.devices()) file.add_devices(d.name);
  auto& assignment = *file.mutable_assignment();
  for (size_t i = 0; i < placement.device_of_op.size(); ++i) {
    assignment[graph.op(i).key] =
        cluster.device(placement.device_of_op[i]).name;
  }
  return file;
}

std::string PlacementToJson(const Placement& placement, const Graph& graph,
                            const Cluster& cluster,
                            const PlacementInfo& info) {
  return FormatJson(PlacementToProto(placement, graph, cluster, info));
}

absl::StatusOr<PlacementOrStrategy> PlacementOrStrategyFromProto(
    const proto::Placement& file, const std::string& source,
    const Graph& graph, const Cluster& cluster) {
  PlacementOrStrategy out;
  absl::StatusOr<Placement> placement =
      PlacementFromProto(file, source, graph, cluster);
  if (!placement.ok()) return placement.status();
  out.placement = *std::move(placement);
  if (!file.has_strategy()) return out;
  auto fail = [&](const std::string& message) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": strategy: ", message));
  };
  const proto::Strategy& message = file.strategy();
  Strategy s;
  // Replica 0's devices: (stage, slot) of each.
  std::vector<std::pair<int, int>> slot_of_first(cluster.num_devices(),
                                                 {-1, -1});
  auto find = [&](int k, const std::string& name) {
    const int d = cluster.FindDevice(name);
    if (d < 0) {
      return absl::StatusOr<int>(fail(
          absl::StrCat("stage ", k, " names device '", name,
                       "', which is not in cluster '", cluster.name(), "'")));
    }
    return absl::StatusOr<int>(d);
  };
  for (int k = 0; k < message.stages_size(); ++k) {
    // The file keeps each replica's first device in `devices` and its
    // further ones in `more_devices` (one entry per replica, or none).
    const proto::Stage& in = message.stages(k);
    if (in.devices().empty()) {
      return fail(absl::StrCat("stage ", k, " has no devices"));
    }
    if (!in.more_devices().empty() &&
        in.more_devices_size() != in.devices_size()) {
      return fail(absl::StrCat("stage ", k, " has ", in.devices_size(),
                               " replicas but ", in.more_devices_size(),
                               " more_devices entries"));
    }
    if (!in.tensor_devices().empty() &&
        in.tensor_devices_size() != in.devices_size()) {
      return fail(absl::StrCat("stage ", k, " has ", in.devices_size(),
                               " replicas but ", in.tensor_devices_size(),
                               " tensor_devices entries"));
    }
    PipelineStage stage;
    for (int r = 0; r < in.devices_size(); ++r) {
      Replica replica;
      ASSIGN_OR_RETURN(int first, find(k, in.devices(r)));
      replica.device_of_slot.push_back(first);
      if (!in.more_devices().empty()) {
        for (const std::string& name : in.more_devices(r).devices()) {
          ASSIGN_OR_RETURN(int d, find(k, name));
          replica.device_of_slot.push_back(d);
        }
      }
      if (!in.tensor_devices().empty()) {
        replica.tensor_devices.push_back(first);
        for (const std::string& name : in.tensor_devices(r).devices()) {
          ASSIGN_OR_RETURN(int d, find(k, name));
          replica.tensor_devices.push_back(d);
        }
      }
      stage.replicas.push_back(std::move(replica));
    }
    if (!in.recompute().empty()) {
      absl::StatusOr<Recompute> recompute = ParseRecompute(in.recompute());
      if (!recompute.ok()) {
        return fail(
            absl::StrCat("stage ", k, ": ", recompute.status().message()));
      }
      stage.recompute = *recompute;
    }
    const std::vector<int>& first_replica = stage.replicas[0].device_of_slot;
    for (size_t i = 0; i < first_replica.size(); ++i) {
      slot_of_first[first_replica[i]] = {k, static_cast<int>(i)};
    }
    s.stages.push_back(std::move(stage));
  }
  if (s.stages.empty()) return fail("no stages");
  bool wide = false;
  for (size_t op = 0; op < out.placement.device_of_op.size(); ++op) {
    const int d = out.placement.device_of_op[op];
    if (slot_of_first[d].first < 0) {
      return fail(absl::StrCat("op '", graph.op(op).key, "' is on '",
                               cluster.device(d).name,
                               "', which is no device of a stage's first "
                               "replica"));
    }
    s.stage_of_op.push_back(slot_of_first[d].first);
    s.slot_of_op.push_back(slot_of_first[d].second);
    wide |= slot_of_first[d].second > 0;
  }
  if (!wide) s.slot_of_op.clear();
  if (message.micro_batches() < 1) {
    return fail(absl::StrCat("micro_batches is ", message.micro_batches(),
                             "; a step runs at least one"));
  }
  s.micro_batches = message.micro_batches();
  if (!message.schedule().empty()) {
    absl::StatusOr<PipelineSchedule> schedule =
        ParseSchedule(message.schedule());
    if (!schedule.ok()) return fail(std::string(schedule.status().message()));
    s.schedule = *schedule;
  }
  if (!message.allreduce().empty()) {
    absl::StatusOr<AllreduceAlgorithm> algorithm =
        ParseAllreduce(message.allreduce());
    if (!algorithm.ok()) {
      return fail(std::string(algorithm.status().message()));
    }
    s.allreduce = *algorithm;
  }
  {
    absl::StatusOr<ZeroStage> zero = ZeroFromNumber(message.zero());
    if (!zero.ok()) return fail(std::string(zero.status().message()));
    s.zero = *zero;
  }
  if (!message.sharding().empty()) {
    s.op_sharding.assign(graph.ops().size(), OpSharding::Replicated());
    for (const auto& [key, name] : message.sharding()) {
      const int op = graph.FindOp(key);
      if (op < 0) {
        return fail(absl::StrCat("sharding names op '", key,
                                 "', which is not in the model"));
      }
      absl::StatusOr<OpSharding> sharding = ParseOpSharding(name);
      if (!sharding.ok()) {
        return fail(
            absl::StrCat("op '", key, "': ", sharding.status().message()));
      }
      s.op_sharding[op] = *sharding;
    }
  }
  s.sequence_parallel = message.sequence_parallel();
  s.overlap_parameter_gather = message.overlap_param_gather();
  if (message.bucket_bytes() < 0) return fail("bucket_bytes is negative");
  if (message.bucket_bytes() > 0) s.bucket_bytes = message.bucket_bytes();
  out.strategy = std::move(s);
  return out;
}

absl::StatusOr<PlacementOrStrategy> ReadPlacementOrStrategyFile(
    const std::string& path, const Graph& graph, const Cluster& cluster) {
  ASSIGN_OR_RETURN(std::string json, ReadFileToString(path));
  return ParsePlacementOrStrategyJson(json, path, graph, cluster);
}

absl::StatusOr<PlacementOrStrategy> ParsePlacementOrStrategyJson(
    const std::string& json, const std::string& source, const Graph& graph,
    const Cluster& cluster) {
  proto::Placement file;
  auto status = google::protobuf::util::JsonStringToMessage(json, &file);
  if (!status.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": not a placement file: ",
                     status.message().as_string()));
  }
  return PlacementOrStrategyFromProto(file, source, graph, cluster);
}

proto::Placement StrategyToProto(const Strategy& strategy, const Graph& graph,
                                 const Cluster& cluster,
                                 const PlacementInfo& info,
                                 double predicted_seconds_per_batch) {
  proto::Placement file = PlacementToProto(FirstReplicaPlacement(strategy),
                                           graph, cluster, info);
  proto::Strategy& message = *file.mutable_strategy();
  for (const PipelineStage& stage : strategy.stages) {
    proto::Stage& out = *message.add_stages();
    for (const Replica& replica : stage.replicas) {
      out.add_devices(cluster.device(replica.device_of_slot[0]).name);
    }
    if (stage.recompute != Recompute::kNone) {
      out.set_recompute(RecomputeName(stage.recompute));
    }
    if (stage.width() > 1) {
      for (const Replica& replica : stage.replicas) {
        proto::ReplicaDevices& more = *out.add_more_devices();
        for (size_t i = 1; i < replica.device_of_slot.size(); ++i) {
          more.add_devices(cluster.device(replica.device_of_slot[i]).name);
        }
      }
    }
    if (stage.tensor() > 1) {
      for (const Replica& replica : stage.replicas) {
        proto::ReplicaDevices& group = *out.add_tensor_devices();
        for (size_t i = 1; i < replica.tensor_devices.size(); ++i) {
          group.add_devices(cluster.device(replica.tensor_devices[i]).name);
        }
      }
    }
  }
  // The shardings, chosen or fixed: what the file's readers run.
  if (HasTensorParallelism(strategy)) {
    absl::StatusOr<TensorSharding> sharding = ShardStrategy(graph, strategy);
    if (sharding.ok()) {
      for (size_t op = 0; op < sharding->op.size(); ++op) {
        if (!sharding->op[op].split()) continue;
        (*message.mutable_sharding())[graph.op(op).key] =
            OpShardingName(sharding->op[op]);
      }
    }
  }
  message.set_micro_batches(strategy.micro_batches);
  message.set_schedule(ScheduleName(strategy.schedule));
  message.set_allreduce(AllreduceName(strategy.allreduce));
  message.set_bucket_bytes(strategy.bucket_bytes);
  message.set_zero(ZeroNumber(strategy.zero));
  message.set_sequence_parallel(strategy.sequence_parallel);
  message.set_overlap_param_gather(strategy.overlap_parameter_gather);
  message.set_predicted_seconds_per_batch(predicted_seconds_per_batch);
  return file;
}

std::string StrategyToJson(const Strategy& strategy, const Graph& graph,
                           const Cluster& cluster, const PlacementInfo& info,
                           double predicted_seconds_per_batch) {
  return FormatJson(StrategyToProto(strategy, graph, cluster, info,
                                    predicted_seconds_per_batch));
}

}  // namespace placer
