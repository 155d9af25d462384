#include "policies/inside_placements.h"

#include <algorithm>
#include <memory>
#include <utility>

#include "base/status_helpers.h"
#include "policies/strategy_search.h"

namespace placer {

absl::StatusOr<std::vector<int>> PlaceOnDevices(
    const PolicyInput& input, const PolicyOptions& options,
    const std::string& policy, const std::vector<int>& devices,
    const std::vector<int64_t>& limits, double budget_seconds) {
  ASSIGN_OR_RETURN(std::unique_ptr<PlacementPolicy> made, NewPolicy(policy));
  const Cluster part = input.cluster.Subset(devices);
  std::unique_ptr<ReadyOrder> order = NewCriticalPathReadyOrder();
  SimulationContext context =
      SimulationContext::Create(input.view, part, input.costs, *order);
  PolicyInput inside{input.view, part, input.costs, context};
  PolicyOptions o;
  o.seed = options.seed;
  o.budget_seconds = budget_seconds;
  o.max_evaluations = options.max_evaluations;
  o.memory_headroom = options.memory_headroom;
  for (int d : devices) o.memory_limit_bytes.push_back(limits[d]);
  for (const auto& [op, device] : options.pinned) {
    auto at = std::find(devices.begin(), devices.end(), device);
    if (at != devices.end()) {
      o.pinned[op] = static_cast<int>(at - devices.begin());
    }
  }
  o.should_stop = options.should_stop;
  ASSIGN_OR_RETURN(Placement placed, made->Place(inside, o));
  return placed.device_of_op;
}

const std::vector<int>* InsidePlacements::Find(const std::string& policy,
                                               int width) const {
  auto it = placed_.find({policy, width});
  return it == placed_.end() ? nullptr : &it->second;
}

void InsidePlacements::Keep(const std::string& policy, int width,
                            std::vector<int> placed) {
  placed_[{policy, width}] = std::move(placed);
}

}  // namespace placer
