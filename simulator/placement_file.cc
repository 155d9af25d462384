#include "simulator/placement_file.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/util/json_util.h"
#include "simulator/placement.pb.h"
#include "profiles/proto_io.h"

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

absl::StatusOr<Placement> ReadPlacementFile(const std::string& path,
                                            const Graph& graph,
                                            const Cluster& cluster) {
  absl::StatusOr<std::string> json = ReadFileToString(path);
  if (!json.ok()) return json.status();
  return ParsePlacementJson(*json, path, graph, cluster);
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

}  // namespace placer
