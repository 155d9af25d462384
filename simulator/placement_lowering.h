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
//  - When the view has updates, task `nodes` is the end of the backward
//    (backward_done): it takes no time, on a resource of its own, and
//    waits for every backward node. Then, per device with updates, in the
//    order of its first update, the task its updates wait for (no time, a
//    resource of its own): it waits for backward_done and for every
//    summed buffer of a parameter's partials copied to the device, as
//    optimizer.step() follows loss.backward() and the executor's device
//    updates once every buffer its updates read has arrived. What updates
//    read moves as autograd moves it, during the backward: a device's
//    summed partials of a weight homed elsewhere leave once its last
//    partial is made.
//  - Copies, the tasks after those: a value sent once to each other device
//    that reads it, after its producer (a parameter: from its group's
//    device, ready at time 0); and, per gradient sum, one summed buffer
//    from each device that makes partials of it other than the sink's,
//    after the last of those partials. Graph inputs and constants are on
//    every device that reads them from the start: no copy.
//  - Edges, per source in the order Simulate's contract handles them: each
//    output in order (a partial to its device's buffer copy or to the sink;
//    a value to each reader on the same device and, once per other device,
//    to its copy), then control dependents, then (a backward node) to
//    backward_done; backward_done to each device's update barrier, each
//    barrier to its device's updates in node order; a copy to its readers
//    there in consumer order (a buffer for an update: to its device's
//    barrier).
//
// LowerStagePass lowers one pass of a wide stage (Strategy's contract) by
// the same walk, on the stage's slots rather than devices: what the
// strategy's lowering copies into its graph for every pass a replica runs
// (wide_passes.h) and the executor's slots exchange (slot_copies.h).
#ifndef PLACER_SIMULATOR_PLACEMENT_LOWERING_H_
#define PLACER_SIMULATOR_PLACEMENT_LOWERING_H_

#include <cstdint>
#include <vector>

#include "absl/types/span.h"
#include "simulator/placement.h"
#include "simulator/simulation_context.h"
#include "simulator/strategy.h"
#include "simulator/task_graph.h"
#include "simulator/view_index.h"

namespace placer {

// A copy between devices (a stage's pass: slots): of a value, or of one
// device's summed partial gradients.
struct CopyTask {
  int value = -1;         // for a gradient sum: the first partial on src
  int gradient_sum = -1;  // or -1
  int src = -1;
  int dst = -1;
  int64_t bytes = 0;
};

struct LoweredPlacement {
  TaskGraph graph;
  int num_nodes = 0;  // tasks 0 .. num_nodes-1 are nodes
  // A stage's pass: task k is node node_of_task[k] of the view; empty for
  // an op placement (task k is node k).
  std::vector<int> node_of_task;
  // The end of the backward (a task), or -1 when the view has no update.
  int backward_done = -1;
  int first_copy = 0;                // task first_copy + k is copies[k]
  std::vector<int> device_of_node;   // per view node (a pass: its slot)
  std::vector<int> device_of_group;  // the placement's: parameters' homes
  std::vector<CopyTask> copies;
  bool is_node(int task) const { return task < num_nodes; }
  // backward_done or a device's update barrier: no time, nothing held.
  bool is_barrier(int task) const {
    return task >= num_nodes && task < first_copy;
  }
  bool is_copy(int task) const { return task >= first_copy; }
  const CopyTask& copy(int task) const { return copies[task - first_copy]; }
  int copy_task(int k) const { return first_copy + k; }
};

LoweredPlacement LowerPlacement(const SimulationContext& context,
                                const Placement& placement);

// The forward (or, `backward`, the backward) pass of stage `stage` of
// `strategy` (which passed CheckStrategy) over one micro-batch, lowered as
// LowerPlacement lowers an op placement's nodes, on the stage's slots:
// resources 0 .. width-1 are the slots (kPriority, ranked by `priorities`
// per view node, all 0 when empty, ties by node key), then one per link
// between two slots that carries a copy. Tasks: `nodes` (the pass's, in
// this order; slot_of_node: per view node, its slot), then the copies;
// every task takes 0 seconds, for the caller to set per replica. What the
// walk keeps of the op placement's: a value the pass makes and a weight of
// the stage's ops (a forward pass: from the start) are copied once to each
// other slot whose nodes in the pass read it; a slot's summed buffer of a
// gradient whose sink is in the pass, or is an update of the stage (a
// copy no task waits for), once the slot's last partial in the pass is
// made. Nothing is copied from outside the pass, and nothing waits for
// what ends it (no backward_done, no update barriers). What the strategy's
// lowering copies into its graph (wide_passes.h) and the executor's slots
// exchange (slot_copies.h).
LoweredPlacement LowerStagePass(const ViewIndex& index,
                                absl::Span<const double> priorities,
                                const Strategy& strategy, int stage,
                                bool backward, const std::vector<int>& nodes,
                                const std::vector<int>& slot_of_node);

}  // namespace placer

#endif  // PLACER_SIMULATOR_PLACEMENT_LOWERING_H_
