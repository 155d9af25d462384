// Reads and writes placement files (simulator/placement.proto as JSON).
//
// Contract: reading checks the file against the graph and the cluster:
// every forward op is assigned, every assigned key is a forward op, and
// every device is one of the cluster's; errors name the file and the
// missing or unknown keys and devices.
#ifndef PLACER_SIMULATOR_PLACEMENT_FILE_H_
#define PLACER_SIMULATOR_PLACEMENT_FILE_H_

#include <string>

#include "absl/status/statusor.h"
#include "graph/graph.h"
#include "simulator/placement.h"
#include "profiles/cluster.h"

namespace placer {

namespace proto {
class Placement;
}  // namespace proto

struct PlacementInfo {
  std::string model;
  std::string policy;
  double predicted_step_seconds = 0;
};

absl::StatusOr<Placement> ParsePlacementJson(const std::string& json,
                                             const std::string& source,
                                             const Graph& graph,
                                             const Cluster& cluster);
// The same checks on the message itself (placements sent over the wire).
absl::StatusOr<Placement> PlacementFromProto(const proto::Placement& message,
                                             const std::string& source,
                                             const Graph& graph,
                                             const Cluster& cluster);
proto::Placement PlacementToProto(const Placement& placement,
                                  const Graph& graph, const Cluster& cluster,
                                  const PlacementInfo& info);

absl::StatusOr<Placement> ReadPlacementFile(const std::string& path,
                                            const Graph& graph,
                                            const Cluster& cluster);

std::string PlacementToJson(const Placement& placement, const Graph& graph,
                            const Cluster& cluster, const PlacementInfo& info);

}  // namespace placer

#endif  // PLACER_SIMULATOR_PLACEMENT_FILE_H_
