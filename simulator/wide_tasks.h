// A wide stage's tasks (a stage whose replica spans several devices, its
// slots) scheduled over their devices: what the strategy lowering
// (simulator/strategy_lowering.h) takes as each wide pass's time and each
// slot's busy time. Internal to simulator/.
//
// Contract: ScheduleWideTasks is a pure function of (context, strategy,
// plan), the strategy having passed CheckStrategy and `plan` being its
// MakeStagePlan; it keeps no state.
#ifndef PLACER_SIMULATOR_WIDE_TASKS_H_
#define PLACER_SIMULATOR_WIDE_TASKS_H_

#include <cstdint>
#include <vector>

#include "simulator/placement_lowering.h"
#include "simulator/simulation_context.h"
#include "simulator/stage_plan.h"
#include "simulator/strategy.h"

namespace placer {

// A wide stage's replica: its tasks scheduled over its devices.
struct WideTaskTimes {
  double forward = 0, backward = 0;  // without accumulation
  // Per slot: busy in the tasks (their partial additions included);
  // adding gradients into the accumulators (after a replica's first
  // backward), and adding up the other slots' buffers that arrived into
  // one it held, of its parameters' gradients (after every backward);
  // when the last of those buffers has arrived (0: none comes), from the
  // backward's start.
  std::vector<double> forward_busy, backward_busy, accumulate, merge;
  std::vector<double> arrived;
  std::vector<double> backward_end;  // per backward node, from the start
  std::vector<double> slot_end;      // per slot: its last backward node
  // What crosses slots in a forward and a backward task: copies, bytes.
  int copies = 0;
  int64_t copied_bytes = 0;
  // With `record` (ScheduleWideTasks): each pass's schedule, from the
  // task's start; else empty.
  struct PassSchedule {
    // Per node of the pass (StageModel's forward or backward order).
    std::vector<double> node_start, node_end;
    // The pass's copies (src and dst: slots), in the lowering's order,
    // and when each ran.
    std::vector<CopyTask> copies;
    std::vector<double> copy_start, copy_end;
  };
  PassSchedule forward_schedule, backward_schedule;
};

// Per stage, per replica: the times of a wide stage's tasks (Strategy's
// contract: each slot's device takes its ready nodes by the context's
// priority, ties by node key; what a node reads from another slot is
// copied on the link between their devices once made, a weight from the
// task's start, a slot's buffer of a parameter's gradient updated on
// another slot once its last partial is made; partials added as
// PartialAdditions charges them, as they happen), each pass lowered once
// by LowerStagePass (placement_lowering.h, the op placement's lowering),
// timed on each replica's devices and run on the event engine (engine.h);
// empty for a stage of one slot. With `record`, each pass's schedule too
// (for traces).
std::vector<std::vector<WideTaskTimes>> ScheduleWideTasks(
    const SimulationContext& context, const Strategy& strategy,
    const StagePlan& plan, bool record = false);

}  // namespace placer

#endif  // PLACER_SIMULATOR_WIDE_TASKS_H_
