#include "simulator/placement.h"

#include "absl/strings/str_cat.h"

namespace placer {

absl::Status CheckPlacementShape(const TrainingView& view,
                                 const Placement& placement, int devices) {
  const Graph& g = view.forward();
  if (placement.device_of_op.size() != g.ops().size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("placement covers ", placement.device_of_op.size(),
                     " ops; the graph has ", g.ops().size()));
  }
  for (size_t k = 0; k < placement.device_of_op.size(); ++k) {
    int d = placement.device_of_op[k];
    if (d < 0 || d >= devices) {
      return absl::InvalidArgumentError(absl::StrCat(
          "placement puts '", g.op(static_cast<int>(k)).key,
          "' on device index ", d, "; the cluster has ", devices,
          " devices"));
    }
  }
  return absl::OkStatus();
}

std::vector<int> DevicesOfNodes(const TrainingView& view,
                                const Placement& placement) {
  const int n = static_cast<int>(view.nodes().size());
  std::vector<int> device(n);
  for (int i = 0; i < n; ++i) {
    device[i] = placement.device_of_op[view.node(i).forward_op];
  }
  return device;
}

}  // namespace placer
