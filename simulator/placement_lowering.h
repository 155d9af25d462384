// An op placement's step (simulator/placement.h) lowered to a TaskGraph
// (simulator/task_graph.h) for the event engine: every view node on its
// device and every copy between devices as a task.
//
// Contract: LowerPlacement is a pure function of (context, placement),
// which must have passed CheckPlacementShape. The graph:
//  - Resources: one per device (kPriority, index = the device; tasks ranked
//    by the context's priorities, ties by node key), then one per link
//    direction that carries a copy (kArrival: FIFO).
//  - Tasks 0 .. nodes-1 are the view's nodes, each taking the context's
//    node_seconds on its device, or alone_node_seconds where the device is
//    the only one of its host the placement uses. (Adding a partial
//    gradient into a buffer the device holds is charged when the node
//    starts, by the simulator: it depends on what ran before.)
//  - Copies, tasks from `nodes` on: a value sent once to each other device
//    that reads it, after its producer (a parameter: from its group's
//    device, ready at time 0); and, per gradient sum, one summed buffer
//    from each device that makes partials of it other than the sink's,
//    after the last of those partials. Graph inputs and constants are on
//    every device that reads them from the start: no copy.
//  - Edges, per source in the order Simulate's contract handles them: each
//    output in order (a partial to its device's buffer copy or to the sink;
//    a value to each reader on the same device and, once per other device,
//    to its copy), then control dependents; a copy to its readers there in
//    consumer order.
#ifndef PLACER_SIMULATOR_PLACEMENT_LOWERING_H_
#define PLACER_SIMULATOR_PLACEMENT_LOWERING_H_

#include <cstdint>
#include <vector>

#include "simulator/placement.h"
#include "simulator/simulation_context.h"
#include "simulator/task_graph.h"

namespace placer {

// A copy between devices: of a value, or of one device's summed partial
// gradients.
struct CopyTask {
  int value = -1;         // for a gradient sum: the first partial on src
  int gradient_sum = -1;  // or -1
  int src = -1;
  int dst = -1;
  int64_t bytes = 0;
};

struct LoweredPlacement {
  TaskGraph graph;
  int num_nodes = 0;
  std::vector<int> device_of_node;
  std::vector<int> device_of_group;  // the placement's: parameters' homes
  std::vector<CopyTask> copies;      // task num_nodes + k is copies[k]
  bool is_copy(int task) const { return task >= num_nodes; }
  const CopyTask& copy(int task) const { return copies[task - num_nodes]; }
};

LoweredPlacement LowerPlacement(const SimulationContext& context,
                                const Placement& placement);

}  // namespace placer

#endif  // PLACER_SIMULATOR_PLACEMENT_LOWERING_H_
