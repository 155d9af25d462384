// Placement: which device runs each forward op, and with it everything the
// training view derives from that op.
//
// Contract: a TrainingView node's colocation group is its forward op
// (TrainingNode::forward_op), and group g is forward op g; a placement gives
// one device per group. The simulator and the executor both expand it to
// one device per view node with DevicesOfNodes, so they cannot disagree on
// where a node runs.
#ifndef PLACER_SIMULATOR_PLACEMENT_H_
#define PLACER_SIMULATOR_PLACEMENT_H_

#include <vector>

#include "absl/status/status.h"
#include "graph/training_view.h"

namespace placer {

struct Placement {
  std::vector<int> device_of_op;
};

// OK when `placement` has one device per forward op of `view`, each in
// [0, devices); else InvalidArgument naming the first op out of range.
absl::Status CheckPlacementShape(const TrainingView& view,
                                 const Placement& placement, int devices);

// The device of every view node (index = node). Requires a placement that
// passed CheckPlacementShape.
std::vector<int> DevicesOfNodes(const TrainingView& view,
                                const Placement& placement);

}  // namespace placer

#endif  // PLACER_SIMULATOR_PLACEMENT_H_
