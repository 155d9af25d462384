// Reads and writes placement files (simulator/placement.proto as JSON).
//
// Contract: reading checks the file against the graph and the cluster:
// every forward op is assigned, every assigned key is a forward op, and
// every device is one of the cluster's; errors name the file and the
// missing or unknown keys and devices.
#ifndef PLACER_SIMULATOR_PLACEMENT_FILE_H_
#define PLACER_SIMULATOR_PLACEMENT_FILE_H_

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "graph/graph.h"
#include "simulator/placement.h"
#include "simulator/strategy.h"
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

std::string PlacementToJson(const Placement& placement, const Graph& graph,
                            const Cluster& cluster, const PlacementInfo& info);

// A placement file that may hold a strategy (its `strategy` field): the
// placement is then replica 0's, and `strategy` says the rest. Errors, on
// top of the placement's: a stage naming a device the cluster lacks, an op
// whose device is no stage's first device, micro_batches < 1, an unknown
// schedule or allreduce. (Whether the stages follow the dataflow is
// CheckStrategy's, which needs the training view.)
struct PlacementOrStrategy {
  Placement placement;
  std::optional<Strategy> strategy;
};
absl::StatusOr<PlacementOrStrategy> PlacementOrStrategyFromProto(
    const proto::Placement& message, const std::string& source,
    const Graph& graph, const Cluster& cluster);
absl::StatusOr<PlacementOrStrategy> ReadPlacementOrStrategyFile(
    const std::string& path, const Graph& graph, const Cluster& cluster);
// The same from a file's text; `source` names it in errors.
absl::StatusOr<PlacementOrStrategy> ParsePlacementOrStrategyJson(
    const std::string& json, const std::string& source, const Graph& graph,
    const Cluster& cluster);

// The file of a strategy: replica 0's assignment plus the strategy.
proto::Placement StrategyToProto(const Strategy& strategy, const Graph& graph,
                                 const Cluster& cluster,
                                 const PlacementInfo& info,
                                 double predicted_seconds_per_batch);
std::string StrategyToJson(const Strategy& strategy, const Graph& graph,
                           const Cluster& cluster, const PlacementInfo& info,
                           double predicted_seconds_per_batch);

}  // namespace placer

#endif  // PLACER_SIMULATOR_PLACEMENT_FILE_H_
